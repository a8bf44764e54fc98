package statusline

// Clean makes a name or text safe for one line of human output (commands, the page, the
// sidebar): what the status line's own clean does. The one sanitiser for human output
// replaces it (DESIGN §9 "Human output").
func Clean(s string) string { return clean(s) }
