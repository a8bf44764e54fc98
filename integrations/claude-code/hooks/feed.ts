/**
 * memd's status document (`memd status --format json`, DESIGN §6) read as what the sidebar and
 * the status line show. Pure: no engine calls here, so every rule is tested on its own.
 *
 * memd's output is read as data from another program: every field is checked, a line or an
 * event of another shape is dropped, texts are folded to one line, and the counts are capped.
 */

export type Kind = 'ok' | 'warn' | 'error' | 'dim' | 'info'
export type Part = { text: string; kind?: Kind }
export type Line = { text: string; kind?: Kind; parts?: Part[] }
export type MemdEvent = { id: number; at: string; kind?: Kind; text: string; parts?: Part[] }
export type Section = { key: string; title: string; order: number; lines: Line[] }

/**
 * What one `memd status` run said. `line` is the status line without memd's own "memd: " front
 * (the engine prefixes the mod's name); `repo` names the store key of the last streamed event.
 */
export type Reading = { ok: boolean; line: string; sections: Section[]; events: MemdEvent[]; repo: string; copies: string[] }

/** What `$.process.run` answers. */
export type RunResult = { exitCode: number | null; stdout: string; stderr: string; isStdoutTruncated?: boolean }

/** The sidebar's limits per section (its README): more lines are left out. */
export const MAX_LINES = 50
/** The sidebar keeps 20 stream entries per consumer: a longer backlog would only push itself out. */
export const MAX_STREAM = 20
/** An event older than this at the time it is streamed says when it happened. */
export const LATE_MS = 5 * 60_000

const KINDS: ReadonlySet<string> = new Set(['ok', 'warn', 'error', 'dim', 'info'])
const KEY = /^[A-Za-z0-9._:-]{1,64}$/
const MAX_TEXT = 400

/** The section the down lines and the buttons go into. */
export const MAIN_KEY = 'sync'
export const MAIN_TITLE = 'memory repo'
export const MAIN_ORDER = 20

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/**
 * The mod's copy of memd's one sanitiser (internal/textsafe, DESIGN §9 "Human output"): C0
 * (tab and newline too: one line), DEL, C1, the bidi embeddings, overrides, isolates and
 * marks (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C), U+2028/U+2029 and lone
 * surrogates are shown as visible escapes (\x1b, \u202e), never drawn, never dropped.
 */
export function escapeText(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u2028\u2029]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, c => {
    const n = c.charCodeAt(0)
    if (c === '\n') return '\\n'
    if (c === '\t') return '\\t'
    if (c === '\r') return '\\r'
    if (n < 0x80) return '\\x' + n.toString(16).padStart(2, '0')
    return '\\u' + n.toString(16).padStart(4, '0')
  })
}

/** One line of text: escaped as memd escapes it, capped. */
export function fold(s: string): string {
  const t = escapeText(s)
  return t.length > MAX_TEXT ? t.slice(0, MAX_TEXT) + '…' : t
}

function kindOf(v: unknown): Kind | undefined {
  return typeof v === 'string' && KINDS.has(v) ? (v as Kind) : undefined
}

function partsOf(v: unknown, text: string): Part[] | undefined {
  if (!Array.isArray(v) || v.length === 0) return undefined
  const parts: Part[] = []
  for (const p of v) {
    if (!isRecord(p) || typeof p.text !== 'string') return undefined
    const kind = kindOf(p.kind)
    parts.push(kind === undefined ? { text: fold(p.text) } : { text: fold(p.text), kind })
  }
  // The parts are the line the pane draws; a set that does not join to the text is not memd's.
  return parts.map(p => p.text).join('') === text ? parts : undefined
}

function lineOf(v: unknown): Line | undefined {
  if (!isRecord(v) || typeof v.text !== 'string') return undefined
  const text = fold(v.text)
  const line: Line = { text }
  const kind = kindOf(v.kind)
  if (kind !== undefined) line.kind = kind
  const parts = partsOf(v.parts, text)
  if (parts !== undefined) line.parts = parts
  return line
}

function sectionOf(v: unknown): Section | undefined {
  if (!isRecord(v) || v.consumer !== 'memd' || typeof v.key !== 'string' || !KEY.test(v.key)) return undefined
  if (!Array.isArray(v.lines)) return undefined
  const lines = v.lines.map(lineOf).filter((l): l is Line => l !== undefined).slice(0, MAX_LINES)
  if (lines.length === 0) return undefined
  const title = typeof v.title === 'string' && v.title.trim() !== '' ? fold(v.title).slice(0, 60) : MAIN_TITLE
  const order = typeof v.order === 'number' && Number.isFinite(v.order) ? v.order : 100
  return { key: v.key, title, order, lines }
}

function eventOf(v: unknown): MemdEvent | undefined {
  if (!isRecord(v) || typeof v.id !== 'number' || !Number.isSafeInteger(v.id) || v.id <= 0) return undefined
  if (typeof v.text !== 'string' || typeof v.at !== 'string') return undefined
  const text = fold(v.text)
  const ev: MemdEvent = { id: v.id, at: v.at, text }
  const kind = kindOf(v.kind)
  if (kind !== undefined) ev.kind = kind
  const parts = partsOf(v.parts, text)
  if (parts !== undefined) ev.parts = parts
  return ev
}

/** memd's summary without its "memd: " front, which the engine adds itself. */
export function bare(summary: string): string {
  return summary.startsWith('memd: ') ? summary.slice('memd: '.length) : summary
}

/** A reading that is one faint line: memd missing, not answering, or saying nothing usable. */
export function down(text: string, kind: Kind = 'dim'): Reading {
  return { ok: false, line: text, sections: [{ key: MAIN_KEY, title: MAIN_TITLE, order: MAIN_ORDER, lines: [{ text, kind }] }], events: [], repo: '', copies: [] }
}

/** Reads memd's JSON document; anything else is one clear line, never an exception. */
export function parseStatus(stdout: string): Reading {
  let doc: unknown
  try {
    doc = JSON.parse(stdout)
  } catch {
    return down('unreadable: memd status --format json printed no JSON', 'warn')
  }
  if (!isRecord(doc) || doc.version !== 1 || !isRecord(doc.summary) || typeof doc.summary.text !== 'string') {
    return down('unreadable: memd status --format json printed no version 1 status document', 'warn')
  }
  const line = fold(bare(doc.summary.text))
  const sections = (Array.isArray(doc.sections) ? doc.sections : []).map(sectionOf).filter((s): s is Section => s !== undefined)
  if (sections.length === 0) sections.push({ key: MAIN_KEY, title: MAIN_TITLE, order: MAIN_ORDER, lines: [{ text: line }] })
  sections.sort((a, b) => a.order - b.order || a.key.localeCompare(b.key))
  const events = (Array.isArray(doc.events) ? doc.events : []).map(eventOf).filter((e): e is MemdEvent => e !== undefined).sort((a, b) => a.id - b.id)
  const repo = typeof doc.repo === 'string' ? doc.repo : ''
  return { ok: true, line, sections, events, repo, copies: copiesOf(doc.conflicts) }
}

/** The reading of one `memd status --format json` run. */
export function readingOf(r: RunResult): Reading {
  if (r.exitCode !== 0) {
    const why = lastLine(r.stderr) || lastLine(r.stdout) || `exit ${r.exitCode ?? 'by signal'}`
    return down(`memd status failed: ${bare(why)}`, 'warn')
  }
  if (r.isStdoutTruncated === true) return down('unreadable: memd status --format json printed more than the engine keeps', 'warn')
  return parseStatus(r.stdout)
}

/** The reading when `memd` could not be started at all. */
export function notStarted(err: unknown): Reading {
  const msg = err instanceof Error ? err.message : String(err)
  if (/ENOENT|not found/i.test(msg)) return down('not installed: no memd on PATH')
  return down(`memd status did not run: ${fold(msg)}`)
}

/** The last non-empty line of an output, folded. */
export function lastLine(s: string): string {
  const lines = s.split('\n').map(l => l.trim()).filter(l => l !== '')
  return fold(lines.at(-1) ?? '')
}

/**
 * The events to stream now: those after `last`, oldest first, at most MAX_STREAM. An id below
 * `last` everywhere means memd's state was started afresh (a new repo, a wiped .git/memd), so
 * everything it holds is new.
 */
export function freshEvents(events: readonly MemdEvent[], last: number): MemdEvent[] {
  const top = events.at(-1)?.id ?? 0
  const from = top < last ? 0 : last
  return events.filter(e => e.id > from).slice(-MAX_STREAM)
}

/** A stream entry's lines: the event as memd coloured it, and when it happened (in the user's own zone) if that was a while ago. */
export function entryLines(ev: MemdEvent, nowMs: number | undefined): Line[] {
  const line: Line = { text: ev.text }
  if (ev.kind !== undefined) line.kind = ev.kind
  if (ev.parts !== undefined) line.parts = ev.parts
  const at = Date.parse(ev.at)
  if (nowMs === undefined || Number.isNaN(at) || nowMs - at < LATE_MS) return [line]
  return [line, { text: `at ${localTime(at)}`, kind: 'dim' }]
}

/** A time as the user's clock shows it: YYYY-MM-DD HH:MM in the local zone. */
export function localTime(ms: number): string {
  const d = new Date(ms)
  const p = (n: number): string => String(n).padStart(2, '0')
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`
}

/** Stream entry titles by what the event is; the first word of memd's text says it. */
const TITLES: readonly [RegExp, string][] = [
  [/^conflict\b/, 'conflict'],
  [/^sleep\b/, 'sleep'],
  [/^offline\b/, 'offline'],
  [/^back online\b/, 'back online'],
  [/^(sync )?error\b/, 'error'],
  [/^hooks?[.\s]/, 'hook'],
  [/^resolved\b/, 'resolved'],
  [/^restored\b/, 'restored'],
]

/** The title of an event's stream entry: its kind, else memd's own title. */
export function titleOf(ev: MemdEvent): string {
  for (const [re, title] of TITLES) if (re.test(ev.text)) return title
  return MAIN_TITLE
}

/**
 * Whether an event is one the user should hear of in the transcript, as the seed's
 * memory-save mod writes one line when a save changed something: what went wrong or needs a
 * hand (a conflict copy, offline, an error, a hook that failed), not news (a sleep run) nor
 * what the user just did (resolved, restored).
 */
export function tellsUser(ev: MemdEvent): boolean {
  return ev.kind === 'warn' || ev.kind === 'error' || /^back online\b/.test(ev.text)
}

/** The conflict copies a resolve button can name: a path without spaces or controls. */
const COPY = /^[^\s\u0000-\u001f\u007f]{1,300}$/

function copiesOf(v: unknown): string[] {
  if (!Array.isArray(v)) return []
  const out: string[] = []
  for (const c of v) {
    if (isRecord(c) && typeof c.copy === 'string' && COPY.test(c.copy) && c.copy.includes('.conflict-')) out.push(c.copy)
  }
  return out.slice(0, 10)
}

/** The resolve buttons for the conflicts section: one per copy. */
export function resolveButtons(copies: readonly string[]): { label: string; command: string; args: string }[] {
  return copies.map(c => ({ label: `resolve ${c.split('/').at(-1) ?? c}`.slice(0, 60), command: 'memd', args: `resolve ${c}` }))
}

/** The `/memd status` answer: the line first, then the sections' other lines. */
export function statusAnswer(r: Reading): string {
  const rest = r.sections.flatMap(s => s.lines.map(l => l.text)).filter(t => t !== r.line)
  return [r.line, ...rest].join('\n')
}

/**
 * The answer of `/memd sync` or `/memd doctor`: the first line is the result (what the
 * sidebar shows at its foot), then what the command printed. Doctor's result names its first
 * finding, and its findings come first after it: the problems themselves, not only counts.
 */
export function runAnswer(what: 'sync' | 'doctor' | 'resolve', r: RunResult): string {
  const out = r.stdout.split('\n').map(l => l.trimEnd()).filter(l => l !== '').map(fold)
  const ok = r.exitCode === 0 || (what === 'doctor' && r.exitCode === 1 && out.length > 0)
  if (!ok) {
    let why = bare(lastLine(r.stderr) || lastLine(r.stdout) || `exit ${r.exitCode ?? 'by signal'}`)
    if (why.startsWith(`${what}: `)) why = why.slice(what.length + 2)
    return [`${what} failed: ${why}`, ...out].join('\n')
  }
  const result = out.at(-1) ?? 'done'
  if (what === 'doctor') {
    const findings = out.slice(0, -1).map(l => l.trim().replace(/\s+/g, ' ')).filter(l => /^(problem|warning|error|warn)\b/.test(l))
    const first = findings.at(0)
    return [`doctor: ${result}${first === undefined ? '' : ` · ${first}`}`, ...findings].join('\n')
  }
  if (what === 'resolve') return [`${what}: ${out.at(0) ?? 'done'}`, ...out.slice(1)].join('\n') // "resolved …" says it
  return [`${what}: ${result}`, ...out.slice(0, -1)].join('\n')
}

/** Why a command could not start, as its answer's first line. */
export function runNotStarted(what: 'sync' | 'doctor' | 'resolve', err: unknown): string {
  const r = notStarted(err)
  return `${what} did not run: ${r.line}`
}

/** The section of the other memory repos on this machine (`memd status --all`). */
export const REPOS_KEY = 'repos'
const REPOS_ORDER = 90

/**
 * The other repos memd runs on this machine, in one line (`memd status --all --format json`
 * lists each with its document): `work ok · projects +2`, worst first as memd orders them,
 * leaving out `repo`, the one the sidebar already shows. Undefined when there is none, or
 * when the answer is not that list.
 */
export function reposSection(r: RunResult, repo: string): Section | undefined {
  if (r.exitCode !== 0 || r.isStdoutTruncated === true) return undefined
  let list: unknown
  try {
    list = JSON.parse(r.stdout)
  } catch {
    return undefined
  }
  if (!Array.isArray(list)) return undefined
  const parts: string[] = []
  for (const e of list) {
    if (!isRecord(e) || typeof e.name !== 'string' || typeof e.repo !== 'string' || e.repo === repo) continue
    const doc = isRecord(e.document) ? e.document : undefined
    const summary = doc !== undefined && isRecord(doc.summary) && typeof doc.summary.text === 'string' ? bare(doc.summary.text) : 'not started'
    const state = doc !== undefined && doc.state === 'ok' && summary.startsWith('no change') ? 'ok' : summary.replace(/ · \d\d:\d\d$/, '')
    parts.push(`${e.name} ${state}`)
  }
  if (parts.length === 0) return undefined
  return { key: REPOS_KEY, title: 'other memory repos', order: REPOS_ORDER, lines: [{ text: fold(parts.join(' · ')), kind: 'dim' }] }
}

/** The section of Claude Code's memory of this session's project (agents.claude_code.memory). */
export const CLAUDE_KEY = 'claude-memory'
const CLAUDE_ORDER = 25

type AgentProject = { path: string; id?: string; reason?: string; last_change?: string; last_machine?: string }

function agentProjects(v: unknown): AgentProject[] {
  if (!Array.isArray(v)) return []
  const out: AgentProject[] = []
  for (const p of v) {
    if (!isRecord(p) || typeof p.path !== 'string' || !p.path.startsWith('/')) continue
    out.push({
      path: p.path,
      ...(typeof p.id === 'string' ? { id: p.id } : {}),
      ...(typeof p.reason === 'string' ? { reason: p.reason } : {}),
      ...(typeof p.last_change === 'string' ? { last_change: p.last_change } : {}),
      ...(typeof p.last_machine === 'string' && p.last_machine !== '' ? { last_machine: p.last_machine } : {}),
    })
  }
  return out
}

/** The project holding cwd: the one whose path is cwd or its nearest ancestor. */
function projectOf(ps: readonly AgentProject[], cwd: string): AgentProject | undefined {
  let best: AgentProject | undefined
  for (const p of ps) {
    const root = p.path.replace(/\/+$/, '')
    if ((cwd === root || cwd.startsWith(root + '/')) && (best === undefined || root.length > best.path.length)) best = p
  }
  return best
}

/**
 * Whether memd keeps Claude Code's memory of the project this session runs in, from the
 * status document's `claude_code` part: `synced as github.com/acme/widget · last change … from
 * <machine>`,
 * or `not synced: <why>`. Undefined when memd does not keep Claude Code's memory (no such
 * part) or the session's folder is unknown.
 */
export function claudeMemorySection(stdout: string, cwd: string | undefined): Section | undefined {
  if (cwd === undefined || !cwd.startsWith('/')) return undefined
  let doc: unknown
  try {
    doc = JSON.parse(stdout)
  } catch {
    return undefined
  }
  if (!isRecord(doc) || !isRecord(doc.claude_code)) return undefined
  const cc = doc.claude_code
  const section = (text: string, kind: Kind): Section => ({ key: CLAUDE_KEY, title: 'Claude Code memory', order: CLAUDE_ORDER, lines: [{ text: fold(text), kind }] })
  const synced = projectOf(agentProjects(cc.synced), cwd)
  const unsynced = projectOf(agentProjects(cc.unsynced), cwd)
  if (synced !== undefined && (unsynced === undefined || synced.path.length >= unsynced.path.length)) {
    const at = synced.last_change === undefined ? NaN : Date.parse(synced.last_change)
    const from = synced.last_machine === undefined ? '' : ` from ${synced.last_machine}`
    const when = Number.isNaN(at) ? 'no change copied on this machine yet' : `last change ${localTime(at)}${from}`
    return section(`synced as ${synced.id ?? '?'} · ${when}`, 'ok')
  }
  if (unsynced !== undefined) return section(`not synced: ${unsynced.reason ?? 'no reason given'}`, 'warn')
  return section('not synced: memd has not found this project yet (it will after this session)', 'dim')
}
