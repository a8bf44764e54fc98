import type { EngineInterface, Register } from 'claude-code'
import { claudeMemorySection, entryLines, freshEvents, notStarted, readingOf, reposSection, resolveButtons, runAnswer, runNotStarted, statusAnswer, tellsUser, titleOf, type Line, type Reading, type RunResult } from './feed'

/**
 * How often an interactive session asks memd again, so the feed follows memd within 2 s of a
 * change (a commit's `committing…` included); a -p run draws nothing, so it has no timer.
 * `memd status` reads one file and never touches git, so asking this often costs little.
 */
const TICK_MS = 2_000
const STATUS_MS = 10_000
const SYNC_MS = 5 * 60_000
const DOCTOR_MS = 2 * 60_000

/** The buttons under memd's first section; each runs a command this mod serves. */
const BUTTONS = [
  { label: 'sync', command: 'memd', args: 'sync' },
  { label: 'doctor', command: 'memd', args: 'doctor' },
] as const

const USAGE = 'use /memd status, /memd sync, /memd doctor or /memd resolve COPY ours|theirs|both'

/**
 * What the hooks share: the section keys standing in the sidebar now, and the chain that keeps
 * two refreshes (a timer tick during a turn's end) from streaming one event twice.
 */
type State = { shown: Set<string>; queue: Promise<unknown>; told?: number; cwd?: string }

/** At most this many transcript lines per refresh: a burst is summed up by the sidebar. */
const MAX_TOLD = 3

/** One `memd <args>` run; a memd that cannot start throws (ENOENT). */
async function memd($: EngineInterface, args: string[], timeoutMs: number): Promise<RunResult> {
  const r = await $.process.run(['memd', ...args], { timeoutMs })
  return { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr, isStdoutTruncated: r.isStdoutTruncated }
}

/**
 * What memd says now, with Claude Code's memory of this session's project and the machine's
 * other repos in one line each; never throws.
 */
async function read($: EngineInterface, cwd: string | undefined): Promise<Reading> {
  let r: Reading
  let out: RunResult
  try {
    out = await memd($, ['status', '--format', 'json'], STATUS_MS)
    r = readingOf(out)
  } catch (err) {
    return notStarted(err)
  }
  if (!r.ok) return r
  const mem = claudeMemorySection(out.stdout, cwd)
  if (mem !== undefined) r.sections.push(mem)
  try {
    const others = reposSection(await memd($, ['status', '--all', '--format', 'json'], STATUS_MS), r.repo)
    if (others !== undefined) r.sections.push(others)
  } catch {
    // An older memd without --all: the sidebar shows this repo alone.
  }
  return r
}

/** The store key of the last event streamed, per repo: two repos' ids are two sequences. */
const lastKey = (repo: string): string => `last-event:${repo}`

async function now($: EngineInterface): Promise<number | undefined> {
  try {
    return await $.clock.now()
  } catch {
    return undefined
  }
}

/** Streams memd's events the sidebar has not had yet, oldest first so the newest is on top. */
async function stream($: EngineInterface, r: Reading): Promise<void> {
  if (!r.ok || r.events.length === 0) return
  const stored = await $.store.get(lastKey(r.repo))
  const last = typeof stored === 'number' ? stored : 0
  const fresh = freshEvents(r.events, last)
  if (fresh.length === 0) return
  const t = await now($)
  let done = last
  try {
    for (const ev of fresh) {
      if (!(await $.sidebar.set({ consumer: 'memd', key: 'events', title: titleOf(ev), lines: entryLines(ev, t), until: 'stream' }))) break
      done = ev.id
    }
  } finally {
    // What went in stays marked, even when a later entry failed: never streamed twice.
    if (done !== last) await $.store.set(lastKey(r.repo), done)
  }
}

/**
 * Writes the reading into the sidebar: memd's sections standing, a key memd no longer prints
 * cleared, new events streamed. False when no sidebar took it (closed, or not installed).
 */
async function toSidebar($: EngineInterface, state: State, r: Reading): Promise<boolean> {
  try {
    const keys = new Set<string>()
    for (const [i, s] of r.sections.entries()) {
      const lines: Line[] = s.lines
      const buttons = r.ok && i === 0 ? BUTTONS : r.ok && s.key === 'conflicts' && r.copies.length > 0 ? resolveButtons(r.copies) : undefined
      if (!(await $.sidebar.set({ consumer: 'memd', key: s.key, title: s.title, lines, ...(buttons === undefined ? {} : { buttons }), until: 'session', order: s.order }))) {
        state.shown.clear() // a closed sidebar keeps nothing
        return false
      }
      keys.add(s.key)
    }
    for (const key of state.shown) {
      if (!keys.has(key)) await $.sidebar.clear({ consumer: 'memd', key })
    }
    state.shown = keys
  } catch {
    // The sidebar mod is not installed, so $.sidebar is missing and the call throws.
    state.shown.clear()
    return false
  }
  try {
    await stream($, r)
  } catch {
    // The store or the stream failed: the sections stand, and the next refresh tries again.
  }
  return true
}

/**
 * One transcript line per event the user should hear of (feed.tellsUser) that happened while
 * this session ran: the first reading only sets where that starts.
 */
function tell($: EngineInterface, state: State, r: Reading): void {
  if (!r.ok) return
  const top = r.events.at(-1)?.id ?? 0
  if (state.told === undefined || top < state.told) {
    state.told = top
    return
  }
  const told = state.told
  for (const ev of r.events.filter(e => e.id > told && tellsUser(e)).slice(-MAX_TOLD)) {
    try {
      $.ui.log(`memd: ${ev.text}`)
    } catch {
      // No transcript on this surface.
    }
  }
  state.told = top
}

/** Reads memd and shows it on the one channel that takes it. */
async function show($: EngineInterface, state: State): Promise<Reading> {
  const r = await read($, state.cwd)
  tell($, state, r)
  const taken = await toSidebar($, state, r)
  try {
    $.ui.status(taken ? undefined : r.line)
  } catch {
    // No status line on this surface: nothing else to show it on.
  }
  return r
}

/** One refresh at a time, in order; a failure never reaches the session. */
function refresh($: EngineInterface, state: State): Promise<Reading | undefined> {
  const next = state.queue.then(() => show($, state)).catch(() => undefined)
  state.queue = next
  return next
}

/** `/memd sync` and `/memd doctor`: run it, redraw, answer with the result first. */
async function runCommand($: EngineInterface, state: State, what: 'sync' | 'doctor'): Promise<string> {
  let text: string
  try {
    text = runAnswer(what, await memd($, [what], what === 'sync' ? SYNC_MS : DOCTOR_MS))
  } catch (err) {
    text = runNotStarted(what, err)
  }
  await refresh($, state)
  return text
}

const KEEPS = new Set(['ours', 'theirs', 'both'])

/** `/memd resolve COPY [ours|theirs|both]`: without a choice, the three commands to pick from. */
async function resolve($: EngineInterface, state: State, args: string[]): Promise<string> {
  const [copy, keep] = args
  if (copy === undefined || copy === '' || args.length > 2 || copy.startsWith('-')) return `resolve: name a conflict copy (${USAGE})`
  if (keep === undefined) {
    return [`resolve ${copy}: keep which version?`, `/memd resolve ${copy} ours    the copy (this machine's)`, `/memd resolve ${copy} theirs  the original`, `/memd resolve ${copy} both    both, the copy as a memory of its own`].join('\n')
  }
  if (!KEEPS.has(keep)) return `resolve: keep ours, theirs or both, not ${keep.slice(0, 20)}`
  let text: string
  try {
    text = runAnswer('resolve', await memd($, ['resolve', copy, '--keep', keep], SYNC_MS))
  } catch (err) {
    text = runNotStarted('resolve', err)
  }
  await refresh($, state)
  return text
}

async function answer($: EngineInterface, state: State, args: string): Promise<string> {
  const verb = args.trim().split(/\s+/)[0] ?? ''
  switch (verb) {
    case '':
    case 'status': {
      const r = await refresh($, state)
      return r === undefined ? 'memd status did not run' : statusAnswer(r)
    }
    case 'sync':
      return runCommand($, state, 'sync')
    case 'doctor':
      return runCommand($, state, 'doctor')
    case 'resolve':
      return resolve($, state, args.trim().split(/\s+/).slice(1))
  }
  return `unknown: ${verb.slice(0, 40)} (${USAGE})`
}

export const register: Register = on => {
  const state: State = { shown: new Set<string>(), queue: Promise.resolve() }

  on('session.start', async ($, e, next) => {
    const r = await next(e)
    state.cwd = e.cwd
    try {
      await $.command.register({ name: 'memd', description: 'memd, the memory repo agent: status, sync, doctor or resolve (memd)', immediate: true })
    } catch {
      // A surface without commands: the feed still draws.
    }
    if (e.isInteractive) $.clock.every(TICK_MS, () => void refresh($, state))
    await refresh($, state)
    return r
  })

  // The main loop's turn end redraws; a subagent's turn changes nothing memd knows.
  on('turn.complete', async ($, e, next) => {
    const r = await next(e)
    if (e.agentId === undefined) await refresh($, state)
    return r
  })

  // The engine prints the plugin name in front of the answer, so the answer does not repeat it.
  on('command.run', { command: 'memd' }, async ($, e) => ({ text: await answer($, state, e.args) }))
}
