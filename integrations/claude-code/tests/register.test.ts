import { describe, expect, mock, test, tier, type Engine, type MockClock, type Plugin, type TestBody } from 'claude-code/testing'
import type { CommandRunInput, On, TurnCompleteInput } from 'claude-code'
import { NOW, STATUS } from './fixtures/status'
import { localTime } from '../hooks/feed'

tier('user')

// The fixtures are what memd itself prints (metrics/golden_test.go writes them): the mod is
// tested against memd's real output, not against a copy of its shape.

const SIDEBAR: Plugin = {
  name: 'sidebar',
  register(on) {
    const stub = async (): Promise<never> => { throw new Error('answered by the test world') }
    on('engine.create', async (_, e, next) => ({ ...(await next(e)), sidebar: { set: stub, clear: stub, isOpen: stub } }))
  },
}

const withSidebar = (name: string, body: TestBody) => test(name, { plugins: [SIDEBAR] }, body)

const REPO = '/home/u/memory'
const BUTTONS = [{ label: 'sync', command: 'memd', args: 'sync' }, { label: 'doctor', command: 'memd', args: 'doctor' }]

type Run = { exitCode: number; stdout: string; stderr: string; isStdoutTruncated: boolean; isStderrTruncated: boolean }
type Set = { consumer: string; key: string; title: string; lines: unknown[]; buttons?: unknown[]; until: string; order?: number }

/** The world: what memd prints, the store, and what the person saw. */
type World = {
  status: Run | 'missing'
  /** What `memd status --all --format json` prints (the machine's repos); not in argv. */
  all: Run
  runs: Record<string, Run>
  argv: string[]
  store: Record<string, unknown>
  open: boolean
  /** A stream entry the sidebar refuses (its set throws), by the text of its first line. */
  refuse?: string
  sets: Set[]
  clears: { consumer: string; key: string }[]
  statuses: (string | undefined)[]
  /** Transcript lines ($.ui.log). */
  logs: string[]
  clock: MockClock
}

const printed = (stdout: string): Run => ({ exitCode: 0, stdout, stderr: '', isStdoutTruncated: false, isStderrTruncated: false })
const failed = (exitCode: number, stderr: string, stdout = ''): Run => ({ exitCode, stdout, stderr, isStdoutTruncated: false, isStderrTruncated: false })

function world(on: On, status: string, store: Record<string, unknown> = {}): World {
  const w: World = { status: printed(status), all: printed('[]'), runs: {}, argv: [], store: { ...store }, open: true, sets: [], clears: [], statuses: [], logs: [], clock: mock.clock(on, { now: NOW }) }
  on('store.get', (_, e) => ({ value: w.store[e.key] }))
  on('store.set', (_, e) => { w.store[e.key] = e.value; return { value: undefined } })
  on('session.start', (_, e) => ({ cwd: e.cwd }))
  on('command.register', (_, e) => ({ value: { command: e.name } }))
  on('ui.status', (_, e) => { w.statuses.push(e.text); return { value: undefined } })
  on('ui.log', (_, e) => { w.logs.push(e.text); return { value: undefined } })
  on('turn.complete', (_, e) => ({ text: e.answer }))
  on('process.run', (_, e) => {
    const cmd = e.argv.join(' ')
    if (cmd === 'memd status --all --format json') return { value: w.all }
    w.argv.push(cmd)
    if (cmd === 'memd status --format json') {
      // The real engine: `$.process.run(memd) failed to start: ENOENT: Executable not found in $PATH: "memd"`.
      if (w.status === 'missing') throw new Error('$.process.run(memd) failed to start: ENOENT: Executable not found in $PATH: "memd"')
      return { value: w.status }
    }
    const r = w.runs[cmd]
    if (r === undefined) throw new Error(`unexpected ${cmd}`)
    return { value: r }
  })
  return w
}

/** Answers `$.sidebar.*`; only a test that loads the sidebar plugin may seat it. */
function seatSidebar(on: On, w: World): void {
  on('sidebar.set', (_, e) => {
    const s = e as unknown as Set
    if (s.until === 'stream' && w.refuse !== undefined && (s.lines[0] as { text: string }).text.startsWith(w.refuse)) throw new Error('refused')
    if (w.open) w.sets.push(s)
    return { value: w.open }
  })
  on('sidebar.clear', (_, e) => { w.clears.push(e as unknown as { consumer: string; key: string }); return { value: undefined } })
}

/** The i-th sidebar.set call (negative from the end). */
function nth(w: World, i: number): Set {
  const s = w.sets.at(i)
  if (s === undefined) throw new Error(`no sidebar.set #${i} in ${JSON.stringify(w.sets)}`)
  return s
}

const started = ($: Engine, isInteractive = false) => $.session.start({ surface: null, isInteractive, cwd: '/work' })

let turns = 0
const turn = (agentId?: string): TurnCompleteInput => ({ answer: 'done', durationMs: 10, isAborted: false, turnId: `t${++turns}`, reason: 'answer', agentId })

const command = (args: string): CommandRunInput => ({ command: 'memd', args, origin: { kind: 'composer' }, presentation: { isFullscreen: false, columns: 80 } })

/** The standing section memd's ok document gives, exactly. */
const OK_SECTION: Set = {
  consumer: 'memd',
  key: 'sync',
  title: 'memory repo',
  lines: [
    { text: '+2 ~1 · 14:32', parts: [{ text: '+2 ~1', kind: 'ok' }, { text: ' · 14:32', kind: 'dim' }] },
    { text: 'committed 3 files, pushed to origin/main', kind: 'dim' },
  ],
  buttons: BUTTONS,
  until: 'session',
  order: 20,
}

/** memd's sections per concern in the fixtures: the last sleep, and ledger notes with one stale. */
const SLEEP_SECTION: Set = { consumer: 'memd', key: 'sleep', title: 'last sleep', lines: [{ text: '03:00: archived 14, arcs 2, expired 3', kind: 'info' }], until: 'session', order: 22 }
const NOTES_SECTION: Set = { consumer: 'memd', key: 'notes', title: 'ledger notes', lines: [{ text: '9 live · 1 stale · 0 expired', kind: 'warn' }], until: 'session', order: 23 }

/** The stream entry of the fixtures' first event: the night's sleep, titled so, with when it happened on the user's clock. */
const SLEEP_ENTRY: Set = {
  consumer: 'memd',
  key: 'events',
  title: 'sleep',
  lines: [
    { text: 'sleep: arcs 2, archived 14, expired 3', kind: 'info', parts: [{ text: 'sleep:', kind: 'info' }, { text: ' arcs 2, archived 14, expired 3' }] },
    { text: `at ${localTime(Date.parse('2026-11-30T03:00:00Z'))}`, kind: 'dim' },
  ],
  until: 'stream',
}

const CONFLICT_ENTRY: Set = {
  consumer: 'memd',
  key: 'events',
  title: 'conflict',
  lines: [{
    text: 'conflict resources/notes/x.html changed on both sides; ours kept as resources/notes/x.conflict-laptop-20261130T143135Z.html',
    kind: 'warn',
    parts: [
      { text: 'conflict', kind: 'warn' },
      { text: ' resources/notes/x.html' },
      { text: ' changed on both sides; ours kept as ', kind: 'dim' },
      { text: 'resources/notes/x.conflict-laptop-20261130T143135Z.html' },
    ],
  }],
  until: 'stream',
}

describe('memd in the sidebar', () => {
  withSidebar('an open sidebar takes memd\'s section with the buttons, then each new event once, and the status line is cleared', async ($, on) => {
    const w = world(on, STATUS.ok)
    seatSidebar(on, w)
    await started($)
    expect(w.sets).toEqual([OK_SECTION, SLEEP_SECTION, NOTES_SECTION, SLEEP_ENTRY])
    expect(w.statuses).toEqual([undefined])
    expect(w.logs).toEqual([]) // what happened before the session is not told again
    expect(w.store[`last-event:${REPO}`]).toBe(41)

    // A merge made a conflict copy: the section says so, and the stream gets the one new event.
    w.sets = []
    w.status = printed(STATUS.conflict)
    await $.turn.complete(turn())
    expect(w.sets.map(s => `${s.key}/${s.until}`)).toEqual(['sync/session', 'conflicts/session', 'sleep/session', 'notes/session', 'events/stream'])
    expect(nth(w, -1)).toEqual(CONFLICT_ENTRY)
    expect(nth(w, 1).lines).toEqual([{ text: 'resources/notes/x.conflict-laptop-20261130T143135Z.html', kind: 'warn' }])
    // Something the user should know about happened: one transcript line.
    expect(w.logs).toEqual(['memd: conflict resources/notes/x.html changed on both sides; ours kept as resources/notes/x.conflict-laptop-20261130T143135Z.html'])
    expect(nth(w, 0).lines).toEqual([
      { text: '+2 ~1 1 conflict · 14:32', parts: [{ text: '+2 ~1', kind: 'ok' }, { text: ' ' }, { text: '1 conflict', kind: 'warn' }, { text: ' · 14:32', kind: 'dim' }] },
      { text: 'merged origin/main: notes/x.html kept beside as a conflict copy', kind: 'dim' },
      { text: '1 conflict copy kept beside the originals', kind: 'warn' },
    ])

    // The same document again, a subagent's turn and the next turn: nothing streamed twice.
    w.sets = []
    await $.turn.complete(turn('agent-1'))
    expect(w.sets).toEqual([])
    await $.turn.complete(turn())
    expect(w.sets.map(s => s.until)).toEqual(['session', 'session', 'session', 'session'])
    expect(w.store[`last-event:${REPO}`]).toBe(42)
    expect(w.logs.length).toBe(1)
  })

  withSidebar('a new session streams only what the last one did not', async ($, on) => {
    const w = world(on, STATUS.conflict, { [`last-event:${REPO}`]: 41 })
    seatSidebar(on, w)
    await started($)
    expect(w.sets.map(s => s.key)).toEqual(['sync', 'conflicts', 'sleep', 'notes', 'events'])
    expect(nth(w, -1)).toEqual(CONFLICT_ENTRY)
  })

  withSidebar('an entry the sidebar refuses: those before it stay marked streamed, it comes again', async ($, on) => {
    const w = world(on, STATUS.conflict)
    seatSidebar(on, w)
    w.refuse = 'conflict'
    await started($)
    expect(w.sets.map(s => s.until)).toEqual(['session', 'session', 'session', 'session', 'stream'])
    expect(w.store[`last-event:${REPO}`]).toBe(41)
    expect(w.statuses).toEqual([undefined]) // the sections stand: no status line
    w.refuse = undefined
    w.sets = []
    await $.turn.complete(turn())
    expect(w.sets.slice(4)).toEqual([CONFLICT_ENTRY])
    expect(w.store[`last-event:${REPO}`]).toBe(42)
  })

  withSidebar('memd started afresh (ids below the stored one) streams its events again', async ($, on) => {
    const w = world(on, STATUS.ok, { [`last-event:${REPO}`]: 900 })
    seatSidebar(on, w)
    await started($)
    expect(nth(w, -1)).toEqual(SLEEP_ENTRY)
    expect(w.store[`last-event:${REPO}`]).toBe(41)
  })

  withSidebar('a section memd no longer prints is cleared', async ($, on) => {
    const doc = JSON.parse(STATUS.ok)
    doc.sections.push({ consumer: 'memd', key: 'hooks', title: 'hooks', until: 'session', order: 30, lines: [{ text: 'after_sync failed', kind: 'error' }] })
    const w = world(on, JSON.stringify(doc))
    seatSidebar(on, w)
    await started($)
    expect(w.sets.map(s => s.key)).toEqual(['sync', 'sleep', 'notes', 'hooks', 'events'])
    expect(nth(w, 3)).toEqual({ consumer: 'memd', key: 'hooks', title: 'hooks', lines: [{ text: 'after_sync failed', kind: 'error' }], until: 'session', order: 30 })
    w.status = printed(STATUS.ok)
    await $.turn.complete(turn())
    expect(w.clears).toEqual([{ consumer: 'memd', key: 'hooks' }])
  })

  withSidebar('Claude Code\'s memory of the session\'s project stands in its own section', async ($, on) => {
    const doc = JSON.parse(STATUS.ok)
    doc.claude_code = { projects: 1, synced: [{ path: '/work', id: 'github.com/acme/widget', last_change: '2026-11-30T14:30:00Z' }], unsynced: [] }
    const w = world(on, JSON.stringify(doc))
    seatSidebar(on, w)
    await started($)
    expect(w.sets.map(s => s.key)).toEqual(['sync', 'sleep', 'notes', 'claude-memory', 'events'])
    expect(nth(w, 3)).toEqual({ consumer: 'memd', key: 'claude-memory', title: 'Claude Code memory', until: 'session', order: 25,
      lines: [{ text: `synced as github.com/acme/widget · last change ${localTime(Date.parse('2026-11-30T14:30:00Z'))}`, kind: 'ok' }] })
  })

  withSidebar('a closed sidebar: the status line carries memd\'s line, and no event is marked streamed', async ($, on) => {
    const w = world(on, STATUS.offline)
    seatSidebar(on, w)
    w.open = false
    await started($)
    expect(w.sets).toEqual([])
    expect(w.statuses).toEqual(['+2 ~1 offline, 3 ahead · 14:32'])
    expect(w.store[`last-event:${REPO}`]).toBe(undefined)
    // Opened later: the backlog comes in, oldest first, so the newest is on top.
    w.open = true
    await $.turn.complete(turn())
    expect(w.sets.filter(s => s.until === 'stream').map(s => (s.lines[0] as { text: string }).text)).toEqual([
      'sleep: arcs 2, archived 14, expired 3',
      'offline: dial tcp: connection refused; commits kept locally',
    ])
    expect(w.sets.filter(s => s.until === 'stream').map(s => s.title)).toEqual(['sleep', 'offline'])
    expect(w.statuses.at(-1)).toBe(undefined)
  })

  test('no sidebar mod loaded: the status line carries memd\'s line', async ($, on) => {
    const w = world(on, STATUS.error)
    await started($)
    expect(w.statuses).toEqual(['error: push origin/main: non-fast-forward after 5 tries · 14:32'])
    w.status = printed(STATUS.ok)
    await $.turn.complete(turn())
    expect(w.statuses.at(-1)).toBe('+2 ~1 · 14:32')
  })

  // The real engine throws `$.process.run(memd) failed to start: ENOENT: …` for a memd not on
  // PATH (the live check in e2e/claude_mod_test.go runs that); a world hook that throws reaches
  // the mod as a call that threw, and feed.test.ts reads the real message.
  test('memd cannot be started: one line, never an exception', async ($, on) => {
    const w = world(on, STATUS.ok)
    w.status = 'missing'
    await started($)
    expect(w.statuses.length).toBe(1)
    expect(w.statuses[0]).toMatch(/^memd status did not run: /)
    expect((await $.command.run(command('status'))).text).toMatch(/^memd status did not run: [^\n]*$/)
    expect((await $.command.run(command('sync'))).text).toMatch(/^sync did not run: /)
  })

  withSidebar('memd cannot be started, sidebar open: the one dim line stands there, without buttons', async ($, on) => {
    const w = world(on, STATUS.ok)
    seatSidebar(on, w)
    w.status = 'missing'
    await started($)
    expect(w.sets.length).toBe(1)
    const { lines, ...rest } = nth(w, 0)
    expect(rest).toEqual({ consumer: 'memd', key: 'sync', title: 'memory repo', until: 'session', order: 20 })
    expect(lines.length).toBe(1)
    expect((lines[0] as { kind?: string }).kind).toBe('dim')
  })

  withSidebar('memd not running and never started: memd\'s own faint stand-in lines', async ($, on) => {
    const w = world(on, STATUS.stale)
    seatSidebar(on, w)
    await started($)
    expect(nth(w, 0).lines).toEqual([
      { text: 'not running', kind: 'dim' },
      { text: 'memd (pid 4242) is not running; last status at 2026-11-30T14:32:05Z', kind: 'dim' },
    ])
    w.status = printed(STATUS.missing)
    await $.turn.complete(turn())
    expect(nth(w, -1).lines[0]).toEqual({ text: 'not started', kind: 'dim' })
  })

  test('memd printing garbage: one clear line in the status, never an exception', async ($, on) => {
    const w = world(on, 'Segmentation fault\n')
    await started($)
    expect(w.statuses).toEqual(['unreadable: memd status --format json printed no JSON'])
    w.status = printed('{"version":2,"summary":{"text":"memd: future"}}\n')
    await $.turn.complete(turn())
    expect(w.statuses.at(-1)).toBe('unreadable: memd status --format json printed no version 1 status document')
    w.status = failed(2, 'memd: config /x.yaml: unknown key "colour"\n')
    await $.turn.complete(turn())
    expect(w.statuses.at(-1)).toBe('memd status failed: config /x.yaml: unknown key "colour"')
  })

  withSidebar('hostile sections are read as data: lines capped at 50, unknown kinds dropped, text folded, bad keys skipped', async ($, on) => {
    const doc = JSON.parse(STATUS.ok)
    doc.sections = [
      { consumer: 'memd', key: 'sync', title: 'memory repo', until: 'session', order: 20, lines: Array.from({ length: 80 }, (_, i) => ({ text: `l${i}\n\u001b[31mx`, kind: 'blink' })) },
      { consumer: 'memd', key: '../../etc', title: 'x', until: 'session', order: 1, lines: [{ text: 'no' }] },
      { consumer: 'other-mod', key: 'x', title: 'x', until: 'session', order: 1, lines: [{ text: 'no' }] },
    ]
    doc.events = [{ id: 'x', text: 'no' }, { id: 7, at: '2026-11-30T14:32:00Z', kind: 'warn', text: 'ok', parts: [{ text: 'not the text' }] }]
    const w = world(on, JSON.stringify(doc))
    seatSidebar(on, w)
    await started($)
    expect(w.sets.map(s => s.key)).toEqual(['sync', 'events'])
    expect(nth(w, 0).lines.length).toBe(50)
    expect(nth(w, 0).lines[0]).toEqual({ text: 'l0\\n\\x1b[31mx' })
    expect(nth(w, 1).lines).toEqual([{ text: 'ok', kind: 'warn' }])
  })

  withSidebar('the buttons run /memd sync and /memd doctor, the result first, then redraw', async ($, on) => {
    const w = world(on, STATUS.ok)
    seatSidebar(on, w)
    w.runs['memd sync'] = printed('committed +1 ~0 -0\npushed to origin/main\nin sync (ahead 0, behind 0)\n')
    w.runs['memd doctor'] = failed(1, '', 'memd doctor: /home/u/memory\n  error   format    areas/x.html: no claim\n1 problem, 0 warnings\n')
    await started($)
    const before = w.argv.length
    expect((await $.command.run(command('sync'))).text).toBe('sync: in sync (ahead 0, behind 0)\ncommitted +1 ~0 -0\npushed to origin/main')
    expect(w.argv.slice(before)).toEqual(['memd sync', 'memd status --format json'])
    expect((await $.command.run(command('doctor'))).text).toBe('doctor: 1 problem, 0 warnings · error format areas/x.html: no claim\nerror format areas/x.html: no claim')
    w.runs['memd sync'] = failed(1, 'memd: sync: no remote "origin" in /home/u/memory\n')
    expect((await $.command.run(command('sync'))).text).toBe('sync failed: no remote "origin" in /home/u/memory')
    expect((await $.command.run(command('frobnicate'))).text).toBe('unknown: frobnicate (use /memd status, /memd sync, /memd doctor or /memd resolve COPY ours|theirs|both)')
  })

  test('/memd status answers memd\'s line first, then its other lines', async ($, on) => {
    world(on, STATUS.warn)
    await started($)
    expect((await $.command.run(command('status'))).text).toBe([
      '+2 ~1 inbox 23, tasks 12, 1 MEMORY.md over cap · 14:32',
      'committed 3 files, pushed to origin/main',
      'inbox 23 (over 20)',
      'task inbox 12 (over 10)',
      '1 MEMORY.md over the soft cap: projects/memd/MEMORY.md',
      '03:00: archived 14, arcs 2, expired 3',
      '9 live · 1 stale · 0 expired',
    ].join('\n'))
    expect((await $.command.run(command(''))).text?.split('\n')[0]).toBe('+2 ~1 inbox 23, tasks 12, 1 MEMORY.md over cap · 14:32')
  })

  test('an interactive session follows memd within 2 s; a -p run has no timer', async ($, on) => {
    const w = world(on, STATUS.ok)
    await started($, true)
    const n = w.argv.length
    await w.clock.advance(2_000)
    expect(w.argv.length).toBe(n + 1)
    w.status = printed(STATUS.busy)
    await w.clock.advance(2_000)
    expect(w.statuses.at(-1)).toBe('committing… · 14:32')
  })

  withSidebar('conflicts: a resolve button per copy; /memd resolve asks which version, then runs memd resolve and redraws', async ($, on) => {
    const doc = JSON.parse(STATUS.conflict)
    const copy = 'resources/notes/x.conflict-laptop-20261130T143135Z.html'
    doc.conflicts = [{ path: 'resources/notes/x.html', copy, machine: 'laptop', at: '2026-11-30T14:31:35Z', ours: 'a', theirs: 'b' }, { path: 'p q.html', copy: 'p q.conflict-x-20261130T143135Z.html' }]
    const w = world(on, JSON.stringify(doc))
    seatSidebar(on, w)
    await started($)
    expect(w.sets.find(s => s.key === 'conflicts')?.buttons).toEqual([{ label: 'resolve x.conflict-laptop-20261130T143135Z.html', command: 'memd', args: `resolve ${copy}` }])
    expect((await $.command.run(command(`resolve ${copy}`))).text?.split('\n')[0]).toBe(`resolve ${copy}: keep which version?`)
    expect(w.argv.filter(a => a.startsWith('memd resolve'))).toEqual([])
    w.runs[`memd resolve ${copy} --keep both`] = printed(`resolved resources/notes/x.html: kept both, the copy is now resources/notes/x-laptop.html\ncommitted 0123456789ab\n`)
    const before = w.argv.length
    expect((await $.command.run(command(`resolve ${copy} both`))).text).toBe('resolve: resolved resources/notes/x.html: kept both, the copy is now resources/notes/x-laptop.html\ncommitted 0123456789ab')
    expect(w.argv.slice(before)).toEqual([`memd resolve ${copy} --keep both`, 'memd status --format json'])
    expect((await $.command.run(command(`resolve ${copy} mine`))).text).toBe('resolve: keep ours, theirs or both, not mine')
  })

  withSidebar('the machine\'s other repos stand in one line of their own', async ($, on) => {
    const w = world(on, STATUS.ok)
    seatSidebar(on, w)
    const repo = JSON.parse(STATUS.ok).repo
    w.all = printed(JSON.stringify([
      { name: 'memory', repo, document: JSON.parse(STATUS.ok) },
      { name: 'work', repo: '/home/u/work', document: { version: 1, state: 'offline', summary: { text: 'memd: offline, 2 ahead · 14:32' } } },
    ]))
    await started($)
    const s = w.sets.find(x => x.key === 'repos')
    expect(s?.lines).toEqual([{ text: 'work offline, 2 ahead', kind: 'dim' }])
  })
})
