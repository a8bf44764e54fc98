package statusline

// The coloured formats' part renderers, for the external tests.
var (
	ANSI    = ansi
	Tmux    = tmux
	Polybar = polybar
)
