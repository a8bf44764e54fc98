import { describe, expect, test, tier } from 'claude-code/testing'
import { claudeMemorySection, entryLines, escapeText, fold, freshEvents, LATE_MS, localTime, MAX_STREAM, notStarted, parseStatus, reposSection, runAnswer, tellsUser, titleOf, type MemdEvent } from '../hooks/feed'
import { NOW, STATUS } from './fixtures/status'

tier('user')

const ev = (id: number, at = '2026-11-30T14:32:00Z'): MemdEvent => ({ id, at, text: `e${id}` })

describe('feed', () => {
  test('names a remote chose are drawn as escapes, bidi overrides and C1 included, as memd escapes them', () => {
    expect(escapeText('evil\u202elmth.exe')).toBe('evil\\u202elmth.exe')
    expect(escapeText('x\u001b]52;c;aGk=\u0007 \u009b2J \u2066\u200f\u061c')).toBe('x\\x1b]52;c;aGk=\\x07 \\u009b2J \\u2066\\u200f\\u061c')
    expect(escapeText('a\nb\tc\r')).toBe('a\\nb\\tc\\r')
    expect(escapeText('café — ok 😀')).toBe('café — ok 😀')
    expect(escapeText('lone \ud800')).toBe('lone \\ud800')
    expect(fold('evil\u202e')).toBe('evil\\u202e')
  })

  test('the real engine\'s message for a memd not on PATH reads as not installed', () => {
    const r = notStarted(new Error('$.process.run(memd) failed to start: ENOENT: Executable not found in $PATH: "memd"'))
    expect(r.line).toBe('not installed: no memd on PATH')
    expect(r.sections.at(0)?.lines).toEqual([{ text: 'not installed: no memd on PATH', kind: 'dim' }])
    expect(r.ok).toBe(false)
  })

  test('every fixture memd prints is read whole: a line, sections, events in id order', () => {
    for (const [name, out] of Object.entries(STATUS)) {
      const r = parseStatus(out)
      expect(r.ok).toBe(true)
      expect(r.line.startsWith('memd: ')).toBe(false)
      expect(r.sections.length > 0).toBe(true)
      expect(r.events.map(e => e.id)).toEqual([...r.events.map(e => e.id)].sort((a, b) => a - b))
      if (name !== 'missing') expect(r.repo).toBe('/home/u/memory')
    }
  })

  test('fresh events: after the last one, capped, and all again after memd started afresh', () => {
    const evs = Array.from({ length: 50 }, (_, i) => ev(i + 1))
    expect(freshEvents(evs, 48).map(e => e.id)).toEqual([49, 50])
    expect(freshEvents(evs, 50)).toEqual([])
    expect(freshEvents(evs, 0).length).toBe(MAX_STREAM)
    expect(freshEvents(evs, 0).at(0)?.id).toBe(31)
    expect(freshEvents(evs.slice(0, 3), 500).map(e => e.id)).toEqual([1, 2, 3])
  })

  test('an event says when it happened only when that was a while ago', () => {
    expect(entryLines(ev(1), NOW)).toEqual([{ text: 'e1' }])
    expect(entryLines(ev(1, '2026-11-30T03:00:00Z'), NOW)).toEqual([{ text: 'e1' }, { text: `at ${localTime(Date.parse('2026-11-30T03:00:00Z'))}`, kind: 'dim' }])
    expect(entryLines(ev(1, '2026-11-30T14:00:00Z'), Date.parse('2026-11-30T14:00:00Z') + LATE_MS - 1).length).toBe(1)
    expect(entryLines(ev(1, 'not a time'), NOW)).toEqual([{ text: 'e1' }])
  })

  test('stream entries are titled by what happened; the transcript hears what needs the user', () => {
    const e = (text: string, kind?: MemdEvent['kind']): MemdEvent => ({ id: 1, at: '2026-11-30T14:32:00Z', text, ...(kind === undefined ? {} : { kind }) })
    expect(['conflict a.html changed on both sides', 'sleep: arcs 2', 'offline: origin unreachable (connection refused)', 'back online', 'sync error: push refused', 'error: commit failed', 'hooks.after_sync failed: exit status 1', 'resolved a.html', 'restored a.html', 'something new'].map(t => titleOf(e(t))))
      .toEqual(['conflict', 'sleep', 'offline', 'back online', 'error', 'error', 'hook', 'resolved', 'restored', 'memory repo'])
    expect([e('conflict x', 'warn'), e('sleep: arcs 2', 'info'), e('error: x', 'error'), e('back online', 'ok'), e('resolved x', 'ok')].map(tellsUser)).toEqual([true, false, true, true, false])
  })

  test('Claude Code\'s memory of this session\'s project: synced with its id and last change, or not and why', () => {
    const doc = JSON.stringify({
      version: 1, summary: { text: 'memd: ok' },
      claude_code: {
        projects: 1,
        synced: [{ path: '/src/widget', id: 'github.com/acme/widget', last_change: '2026-12-06T16:00:00Z', last_machine: 'vm-b\u202e' }, { path: '/src/new', id: 'root-0123456789ab' }],
        unsynced: [{ path: '/src/widget/vendor/lib', reason: 'no origin with a host and no commit' }, { path: '/tmp', reason: 'not a git checkout\u202e' }],
      },
    })
    expect(claudeMemorySection(doc, '/src/widget/cmd')?.lines).toEqual([{ text: `synced as github.com/acme/widget · last change ${localTime(Date.parse('2026-12-06T16:00:00Z'))} from vm-b\\u202e`, kind: 'ok' }])
    expect(claudeMemorySection(doc, '/src/new')?.lines).toEqual([{ text: 'synced as root-0123456789ab · no change copied on this machine yet', kind: 'ok' }])
    expect(claudeMemorySection(doc, '/src/widget/vendor/lib/x')?.lines).toEqual([{ text: 'not synced: no origin with a host and no commit', kind: 'warn' }])
    expect(claudeMemorySection(doc, '/tmp')?.lines).toEqual([{ text: 'not synced: not a git checkout\\u202e', kind: 'warn' }])
    expect(claudeMemorySection(doc, '/src/widgetx')?.lines.at(0)?.kind).toBe('dim')
    expect(claudeMemorySection(doc, '/src/widget')?.key).toBe('claude-memory')
    expect(claudeMemorySection(JSON.stringify({ version: 1, summary: { text: 'memd: ok' } }), '/src/widget')).toBeUndefined()
    expect(claudeMemorySection('not json', '/src/widget')).toBeUndefined()
    expect(claudeMemorySection(doc, undefined)).toBeUndefined()
  })

  test('a command killed by its timeout says so', () => {
    expect(runAnswer('sync', { exitCode: null, stdout: '', stderr: '' })).toBe('sync failed: exit by signal')
  })

  test('the other repos on the machine stand in one line, this one left out', () => {
    const doc = (text: string, state: string) => ({ version: 1, state, summary: { text } })
    const list = JSON.stringify([
      { name: 'projects', repo: '/h/projects', document: doc('memd: +2 · 14:32', 'ok') },
      { name: 'memory', repo: '/h/memory', document: doc('memd: no change · 14:32', 'ok') },
      { name: 'work\u202e', repo: '/h/work', document: doc('memd: offline, 2 ahead · 14:32', 'offline') },
      { name: 'new', repo: '/h/new', document: null },
    ])
    const s = reposSection({ exitCode: 0, stdout: list, stderr: '' }, '/h/memory')
    expect(s?.key).toBe('repos')
    expect(s?.lines).toEqual([{ text: 'projects +2 · work\\u202e offline, 2 ahead · new not started', kind: 'dim' }])
    expect(reposSection({ exitCode: 0, stdout: JSON.stringify([{ name: 'memory', repo: '/h/memory', document: doc('memd: ok', 'ok') }]), stderr: '' }, '/h/memory')).toBeUndefined()
    expect(reposSection({ exitCode: 2, stdout: '', stderr: 'unknown flag' }, '/h/memory')).toBeUndefined()
    expect(reposSection({ exitCode: 0, stdout: '{"version":1}', stderr: '' }, '/h/memory')).toBeUndefined()
  })
})
