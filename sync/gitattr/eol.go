package gitattr

import "bytes"

// crlfAction is git's convert.c enum crlf_action: what happens to line endings.
type crlfAction byte

const (
	crlfUndefined crlfAction = iota
	crlfBinary               // never converted
	crlfText                 // text: eol from core.eol / core.autocrlf
	crlfTextInput            // text, LF in the work tree
	crlfTextCRLF             // text, CRLF in the work tree
	crlfAuto                 // text=auto: converted if it looks like text
	crlfAutoInput
	crlfAutoCRLF
)

func (a crlfAction) auto() bool { return a == crlfAuto || a == crlfAutoInput || a == crlfAutoCRLF }

// eolConfig is core.autocrlf and core.eol.
type eolConfig struct {
	autocrlf string // "true", "input", "false"/""
	eol      string // "lf", "crlf", "native"/""
}

// checkCRLF is git_path_check_crlf on one attribute (text, or the old crlf).
func checkCRLF(v value) crlfAction {
	switch {
	case v.set():
		return crlfText
	case v.unset():
		return crlfBinary
	case v.state == 'v' && v.val == "input":
		return crlfTextInput
	case v.state == 'v' && v.val == "auto":
		return crlfAuto
	}
	return crlfUndefined
}

// action is convert_attrs' decision for one path's attributes.
func (c eolConfig) action(attrs map[string]value) crlfAction {
	a := checkCRLF(attrs["text"])
	if a == crlfUndefined {
		a = checkCRLF(attrs["crlf"])
	}
	if a != crlfBinary {
		eol := attrs["eol"]
		lf := eol.state == 'v' && eol.val == "lf"
		crlf := eol.state == 'v' && eol.val == "crlf"
		switch {
		case a == crlfAuto && lf:
			a = crlfAutoInput
		case a == crlfAuto && crlf:
			a = crlfAutoCRLF
		case lf:
			a = crlfTextInput
		case crlf:
			a = crlfTextCRLF
		}
	}
	switch {
	case a == crlfText && c.eolIsCRLF():
		a = crlfTextCRLF
	case a == crlfText:
		a = crlfTextInput
	case a == crlfUndefined && c.autocrlf == "true":
		a = crlfAutoCRLF
	case a == crlfUndefined && c.autocrlf == "input":
		a = crlfAutoInput
	case a == crlfUndefined:
		a = crlfBinary
	}
	return a
}

// eolIsCRLF is text_eol_is_crlf (the native end of line is LF: memd runs on unix).
func (c eolConfig) eolIsCRLF() bool {
	switch c.autocrlf {
	case "true":
		return true
	case "input":
		return false
	}
	return c.eol == "crlf"
}

// outputCRLF is output_eol(action) == EOL_CRLF.
func (c eolConfig) outputCRLF(a crlfAction) bool {
	switch a {
	case crlfTextCRLF, crlfAutoCRLF:
		return true
	case crlfText, crlfAuto:
		return c.eolIsCRLF()
	}
	return false
}

// textStat is git's struct text_stat.
type textStat struct {
	nul, loneCR, loneLF, crlf, printable, nonprintable int
}

func gatherStats(b []byte) textStat {
	var s textStat
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '\r':
			if i+1 < len(b) && b[i+1] == '\n' {
				s.crlf++
				i++
			} else {
				s.loneCR++
			}
		case c == '\n':
			s.loneLF++
		case c == 127:
			s.nonprintable++
		case c < 32:
			switch c {
			case '\b', '\t', 033, 014:
				s.printable++
			case 0:
				s.nul++
				s.nonprintable++
			default:
				s.nonprintable++
			}
		default:
			s.printable++
		}
	}
	if len(b) > 0 && b[len(b)-1] == 032 { // a DOS end-of-file mark is not binary
		s.nonprintable--
	}
	return s
}

// isBinary is convert_is_binary.
func (s textStat) isBinary() bool {
	return s.loneCR > 0 || s.nul > 0 || (s.printable>>7) < s.nonprintable
}

// crlfToGit is crlf_to_git: CRLF to LF on the way in. indexHasCR reports whether the
// path's current blob (git: the index's) holds a CR, which stops an auto conversion.
func crlfToGit(a crlfAction, src []byte, indexHasCR func() bool) []byte {
	if a == crlfBinary || len(src) == 0 || bytes.IndexByte(src, '\r') < 0 {
		return src
	}
	st := gatherStats(src)
	if st.crlf == 0 {
		return src
	}
	if a.auto() {
		if st.isBinary() || (indexHasCR != nil && indexHasCR()) {
			return src
		}
	}
	out := make([]byte, 0, len(src)-st.crlf)
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c == '\r' && (a.auto() || (i+1 < len(src) && src[i+1] == '\n')) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// crlfToWorktree is crlf_to_worktree: a lone LF becomes CRLF on checkout where the
// action's end of line is CRLF.
func (c eolConfig) crlfToWorktree(a crlfAction, src []byte) []byte {
	if !c.outputCRLF(a) || len(src) == 0 {
		return src
	}
	st := gatherStats(src)
	if st.loneLF == 0 {
		return src
	}
	if a.auto() && (st.loneCR > 0 || st.crlf > 0 || st.isBinary()) {
		return src
	}
	out := make([]byte, 0, len(src)+st.loneLF)
	for i, ch := range src {
		if ch == '\n' && (i == 0 || src[i-1] != '\r') {
			out = append(out, '\r')
		}
		out = append(out, ch)
	}
	return out
}
