/**
 * The shared sidebar's API (mod `sidebar`, KilimcininKorOglu/claude-code-mods), as this mod
 * calls it. The sidebar mod is not a declared dependency on purpose: a declared one stops this
 * mod loading where the sidebar is not installed. Without it `$.sidebar` is missing and a call
 * throws; with the pane closed `set` answers false.
 */
type SidebarKind = 'ok' | 'warn' | 'error' | 'dim' | 'info'
type SidebarPart = { text: string; kind?: SidebarKind }
type SidebarLine = { text: string; kind?: SidebarKind; parts?: readonly SidebarPart[] }
type SidebarButton = { label: string; command: string; args?: string }
type SidebarSection = {
  consumer: string
  key: string
  title: string
  lines: readonly SidebarLine[]
  buttons?: readonly SidebarButton[]
  until: 'turn' | 'session' | 'stream'
  order?: number
}

declare module 'claude-code' {
  interface EngineInterface {
    sidebar: {
      set(section: SidebarSection): Promise<boolean>
      clear(input: { consumer: string; key: string }): Promise<void>
      isOpen(): Promise<boolean>
    }
  }
}

export {}
