package gitattr

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// maxPktData is the most payload one pkt-line carries (65520 - 4).
const maxPktData = 65516

// errProtocol is a long-running filter saying something git's protocol does not allow.
var errProtocol = errors.New("filter process protocol error")

// procFilter is one running `filter.<d>.process` (gitattributes(5), "Long Running Filter
// Process"): version 2, capabilities clean and smudge, one request at a time.
type procFilter struct {
	cmd    *exec.Cmd
	w      io.WriteCloser
	r      *bufio.Reader
	caps   map[string]bool
	stderr *capped
	done   chan struct{}
	broken bool // an I/O or protocol error: the conversation is lost, the process is ended
}

// startProcess runs command with `sh -c` in dir and does the handshake.
func startProcess(dir, command string) (*procFilter, error) {
	c := exec.Command("sh", "-c", command)
	c.Dir = dir
	c.Env = filterEnv()
	ownGroup(c)
	p := &procFilter{cmd: c, stderr: &capped{max: 512}, caps: map[string]bool{}, done: make(chan struct{})}
	c.Stderr = p.stderr
	w, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	wait, err := startOwn(c)
	if err != nil {
		return nil, err
	}
	go func() { _ = wait(); close(p.done) }()
	p.w, p.r = w, bufio.NewReaderSize(out, 64<<10)
	if err := p.handshake(); err != nil {
		p.close()
		return nil, p.explain(fmt.Errorf("handshake: %w", err))
	}
	return p, nil
}

func (p *procFilter) handshake() error {
	if err := p.writeList("git-filter-client", "version=2"); err != nil {
		return err
	}
	hello, err := p.readList()
	if err != nil {
		return err
	}
	if len(hello) < 2 || hello[0] != "git-filter-server" || hello[1] != "version=2" {
		return fmt.Errorf("%w: greeting %q", errProtocol, hello)
	}
	if err := p.writeList("capability=clean", "capability=smudge"); err != nil {
		return err
	}
	caps, err := p.readList()
	if err != nil {
		return err
	}
	for _, c := range caps {
		if name, ok := strings.CutPrefix(c, "capability="); ok {
			p.caps[name] = true
		}
	}
	return nil
}

// run sends one clean or smudge request and returns the filtered content.
func (p *procFilter) run(op, rel string, data []byte) ([]byte, error) {
	if !p.caps[op] {
		return nil, fmt.Errorf("the process does not offer %s", op)
	}
	kill := time.AfterFunc(commandTimeout, func() { _ = killGroup(p.cmd) })
	defer kill.Stop()
	if err := p.writeList("command="+op, "pathname="+rel); err != nil {
		return nil, p.explain(err)
	}
	if err := p.writeContent(data); err != nil {
		return nil, p.explain(err)
	}
	status, err := p.readStatus("success")
	if err != nil {
		return nil, p.explain(err)
	}
	if status != "success" {
		if status == "abort" {
			p.caps[op] = false // git stops asking for this capability
		}
		return nil, fmt.Errorf("status=%s", status)
	}
	out, err := p.readContent()
	if err != nil {
		return nil, p.explain(err)
	}
	if status, err = p.readStatus(status); err != nil {
		return nil, p.explain(err)
	}
	if status != "success" {
		return nil, fmt.Errorf("status=%s after the content", status)
	}
	return out, nil
}

// readStatus reads a key=value list; its status= (if any) replaces prev.
func (p *procFilter) readStatus(prev string) (string, error) {
	list, err := p.readList()
	if err != nil {
		return "", err
	}
	for _, kv := range list {
		if s, ok := strings.CutPrefix(kv, "status="); ok {
			prev = s
		}
	}
	return prev, nil
}

// explain adds the process's stderr to an I/O or protocol error, after which the process
// is ended (the next request starts a new one).
func (p *procFilter) explain(err error) error {
	p.broken = true
	_ = killGroup(p.cmd)
	if msg := strings.TrimSpace(p.stderr.String()); msg != "" {
		return fmt.Errorf("%w: %s", err, msg)
	}
	return err
}

// alive says whether the process has not exited.
func (p *procFilter) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return !p.broken
	}
}

// close ends the process: git closes its stdin and waits; a stuck one is killed.
func (p *procFilter) close() {
	_ = p.w.Close()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = killGroup(p.cmd)
		<-p.done
	}
}

func (p *procFilter) writePkt(b []byte) error {
	if _, err := fmt.Fprintf(p.w, "%04x", len(b)+4); err != nil {
		return err
	}
	_, err := p.w.Write(b)
	return err
}

func (p *procFilter) flush() error {
	_, err := io.WriteString(p.w, "0000")
	return err
}

func (p *procFilter) writeList(lines ...string) error {
	for _, l := range lines {
		if err := p.writePkt([]byte(l + "\n")); err != nil {
			return err
		}
	}
	return p.flush()
}

func (p *procFilter) writeContent(data []byte) error {
	for len(data) > 0 {
		n := min(len(data), maxPktData)
		if err := p.writePkt(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return p.flush()
}

// readPkt reads one packet; flush is a nil payload with ok false.
func (p *procFilter) readPkt() (payload []byte, ok bool, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(p.r, hdr[:]); err != nil {
		return nil, false, err
	}
	n, err := strconv.ParseUint(string(hdr[:]), 16, 16)
	if err != nil {
		return nil, false, fmt.Errorf("%w: bad length %q", errProtocol, hdr)
	}
	if n == 0 {
		return nil, false, nil
	}
	if n < 4 {
		return nil, false, fmt.Errorf("%w: bad length %q", errProtocol, hdr)
	}
	payload = make([]byte, n-4)
	if _, err := io.ReadFull(p.r, payload); err != nil {
		return nil, false, err
	}
	return payload, true, nil
}

func (p *procFilter) readList() ([]string, error) {
	var out []string
	for {
		b, ok, err := p.readPkt()
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, strings.TrimSuffix(string(b), "\n"))
	}
}

func (p *procFilter) readContent() ([]byte, error) {
	var out []byte
	for {
		b, ok, err := p.readPkt()
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, b...)
	}
}
