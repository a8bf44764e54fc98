package gitrepo

// Fetching the one ref memd follows (docs/ARCHITECTURE.md §11): go-git v5 speaks only protocol v0, whose
// upload-pack starts by sending every ref the remote has; go-git decodes them all onto the
// heap, so a remote with 300k refs (a forge's pull-request refs) cost 136 MB and 3.7 s per
// sync. memd speaks the small part of protocol v2 it needs itself: `ls-refs` with a ref
// prefix for the branch (remotehead.go), then, only when the head is an object memd lacks,
// one `fetch` with that want, the local tips as haves and `done` (no negotiation rounds: the
// server sends what the haves do not cover, as git's first round with done would). The
// pack goes to the storage's PackfileWriter (git index-pack, gitstore/indexpack.go).
//
// Transports: http(s) (one POST per command, stateless-rpc), file remotes through
// `git upload-pack` with GIT_PROTOCOL=version=2 when git is installed, and ssh with
// GIT_PROTOCOL=version=2 sent as an env request (sshv2.go). git://, a server without v2
// (over ssh: one whose sshd does not accept the env), or no git binary: go-git's fetch, as
// before (errFetchV2Unsupported).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitstore"
)

// errFetchV2Unsupported: this remote is fetched through go-git instead.
var errFetchV2Unsupported = errors.New("no protocol v2 fetch for this remote")

// v2Remote runs one v2 command (its request body) and returns the answer to read.
type v2Remote interface {
	command(ctx context.Context, body []byte) (io.ReadCloser, error)
}

// fetchOneRefLocked brings the remote's branch into the tracking ref over protocol v2 and
// returns its head (zero: the remote has no such branch, and the tracking ref is dropped).
// errFetchV2Unsupported: use go-git's fetch. Caller holds r.mu.
func (r *Repo) fetchOneRefLocked(ctx context.Context, tgt *gitremote.Target, track plumbing.ReferenceName) (plumbing.Hash, error) {
	ep, err := transport.NewEndpoint(tgt.URL)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	tgt.Apply(ep) // git's proxy and CA for this URL, which v2Client follows
	rem, head, closeConn, err := r.remoteHeadV2(ctx, ep, tgt)
	if closeConn != nil {
		defer closeConn()
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if head.IsZero() {
		_ = r.repo.Storer.RemoveReference(track)
		return plumbing.ZeroHash, nil
	}
	if r.repo.Storer.HasEncodedObject(head) != nil {
		if err := r.fetchObjectsV2Locked(ctx, rem, head, track); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	if err := r.setTrackingRef(track, head); err != nil {
		return plumbing.ZeroHash, err
	}
	return head, nil
}

// remoteHeadV2 picks ep's v2 transport (rem, for the fetch to follow) and asks it for the
// branch's head: ls-refs, or a file remote's ref files. closeConn, when not nil, closes the
// ssh connection the fetch goes on to use; the caller defers it whatever err is, so the
// connection lives until the fetch is done. errFetchV2Unsupported: use go-git's fetch.
func (r *Repo) remoteHeadV2(ctx context.Context, ep *transport.Endpoint, tgt *gitremote.Target) (rem v2Remote, head plumbing.Hash, closeConn func(), err error) {
	auth := tgt.Auth
	ref := r.BranchRef().String()
	switch ep.Protocol {
	case "http", "https":
		rem = &httpV2{ep: ep, auth: auth}
		// The look that kicked this sync just asked (remotehead.go): not again.
		var ok bool
		if head, ok = r.lookedHead(tgt.URL); !ok {
			head, err = httpLsRefs(ctx, ep, auth, ref)
		}
	case "file":
		git, lerr := exec.LookPath("git")
		if lerr != nil {
			return nil, plumbing.ZeroHash, nil, errFetchV2Unsupported
		}
		rem = &fileV2{git: git, path: ep.Path}
		head, err = fileRemoteHead(ep.Path, ref)
	case "ssh":
		if sshKnownV0(ep.String()) {
			return nil, plumbing.ZeroHash, nil, errFetchV2Unsupported
		}
		s, derr := dialSSHV2(ctx, ep, auth)
		if derr != nil {
			return nil, plumbing.ZeroHash, nil, derr
		}
		closeConn = func() { _ = s.Close() }
		var v2 bool
		head, v2, err = s.lsRefs(ctx, ref)
		if err == nil {
			noteSSHProtocol(ep.String(), v2)
		}
		if err == nil && !v2 {
			return nil, plumbing.ZeroHash, closeConn, errFetchV2Unsupported // a v0 server: go-git's fetch
		}
		rem = s
	default:
		return nil, plumbing.ZeroHash, nil, errFetchV2Unsupported
	}
	if errors.Is(err, ErrCheckUnsupported) {
		return nil, plumbing.ZeroHash, closeConn, errFetchV2Unsupported
	}
	return rem, head, closeConn, err
}

// fetchObjectsV2Locked brings head, which the store lacks, before the tracking ref names
// it: a file remote's small fast-forward is copied from its objects; otherwise a v2 pack
// is fetched and head checked connected to what the tracking ref named before.
// errFetchV2Unsupported: ls-refs answered, fetch did not. Caller holds r.mu.
func (r *Repo) fetchObjectsV2Locked(ctx context.Context, rem v2Remote, head plumbing.Hash, track plumbing.ReferenceName) error {
	err := errCopyDeclined
	if f, ok := rem.(*fileV2); ok {
		// A small fast-forward is copied from the remote's objects (filefetch.go).
		t0 := time.Now()
		err = r.copyFromFileRemoteLocked(fileRemoteGitDir(f.path), head, track)
		r.log.Debug("fetch: copy from the file remote", "took", time.Since(t0), "err", err) // declined: git fetches
		if err != nil && !errors.Is(err, errCopyDeclined) {
			return err
		}
	}
	if err != nil {
		if err = r.fetchPackV2(ctx, rem, head); err == nil {
			old, _ := gitstore.ReadRef(r.commonDir, track.String())
			err = r.checkConnectedLocked(head, old)
			if errors.Is(err, plumbing.ErrObjectNotFound) && r.shallow() {
				if err = r.completeShallowFetchLocked(ctx, track); err == nil {
					err = r.checkConnectedLocked(head, old)
				}
			}
		}
	}
	if errors.Is(err, ErrCheckUnsupported) {
		return errFetchV2Unsupported // ls-refs answered, fetch did not
	}
	return err
}

// fetchPackV2 asks for want with the local tips as haves and stores the pack.
func (r *Repo) fetchPackV2(ctx context.Context, rem v2Remote, want plumbing.Hash) error {
	var b bytes.Buffer
	pkt := func(s string) { fmt.Fprintf(&b, "%04x%s", len(s)+4, s) }
	pkt("command=fetch\n")
	pkt("agent=memd\n")
	b.WriteString("0001")
	pkt("ofs-delta\n")
	pkt("no-progress\n")
	pkt("want " + want.String() + "\n")
	for _, h := range r.localTipsLocked() {
		pkt("have " + h.String() + "\n")
	}
	pkt("done\n")
	b.WriteString("0000")
	body, err := rem.command(ctx, b.Bytes())
	if err != nil {
		return err
	}
	defer body.Close()
	pw, ok := r.repo.Storer.(storer.PackfileWriter)
	if !ok {
		return errFetchV2Unsupported
	}
	w, err := pw.PackfileWriter()
	if err != nil {
		return fmt.Errorf("store fetched pack: %w", err)
	}
	if err := readPackSection(bufio.NewReaderSize(body, 64<<10), w); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

// localTipsLocked are the haves: the branch and every remote-tracking ref memd has.
func (r *Repo) localTipsLocked() []plumbing.Hash {
	var out []plumbing.Hash
	seen := map[plumbing.Hash]bool{}
	refs, err := r.repo.Storer.IterReferences()
	if err != nil {
		return nil
	}
	_ = refs.ForEach(func(ref *plumbing.Reference) error {
		n := ref.Name()
		if ref.Type() == plumbing.HashReference && (n == r.BranchRef() || n.IsRemote()) && !seen[ref.Hash()] {
			seen[ref.Hash()] = true
			out = append(out, ref.Hash())
		}
		return nil
	})
	return out
}

// readPackSection skips the answer's sections up to "packfile" and copies its side-band
// channel 1 into w; channel 3 is the server's error.
func readPackSection(br *bufio.Reader, w io.Writer) error {
	inPack := false
	for {
		line, flush, err := readPkt(br)
		if err != nil {
			return fmt.Errorf("read fetch answer: %w", err)
		}
		if flush {
			if inPack {
				return nil
			}
			continue // the end of another section
		}
		if !inPack {
			s := strings.TrimSuffix(string(line), "\n")
			if strings.HasPrefix(s, "ERR ") {
				return fmt.Errorf("remote refused the fetch: %s", strings.TrimPrefix(s, "ERR "))
			}
			inPack = s == "packfile"
			continue
		}
		if len(line) == 0 {
			continue
		}
		switch line[0] {
		case 1:
			if _, err := w.Write(line[1:]); err != nil {
				return err
			}
		case 3:
			return fmt.Errorf("remote: %s", strings.TrimSpace(string(line[1:])))
		}
	}
}

// httpV2 is a smart-HTTP remote: each command is one POST.
type httpV2 struct {
	ep   *transport.Endpoint
	auth transport.AuthMethod
}

func (h *httpV2) command(ctx context.Context, body []byte) (io.ReadCloser, error) {
	u := &url.URL{Scheme: h.ep.Protocol, Host: h.ep.Host, Path: strings.TrimSuffix(h.ep.Path, "/") + "/git-upload-pack"}
	if h.ep.Port != 0 {
		u.Host = h.ep.Host + ":" + strconv.Itoa(h.ep.Port)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	setV2Headers(req, h.ep, h.auth)
	resp, err := v2Client(h.ep).Do(req)
	if err != nil {
		return nil, err
	}
	if err := v2Status(resp); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp.Body, nil
}

// setV2Headers are a v2 upload-pack POST's headers and credentials.
func setV2Headers(req *http.Request, ep *transport.Endpoint, auth transport.AuthMethod) {
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	req.Header.Set("Accept", "application/x-git-upload-pack-result")
	req.Header.Set("Git-Protocol", "version=2")
	req.Header.Set("User-Agent", "git/memd")
	switch a := auth.(type) {
	case githttp.AuthMethod:
		a.SetAuth(req)
	case nil:
		if ep.User != "" {
			req.SetBasicAuth(ep.User, ep.Password)
		}
	}
}

// v2Status maps an upload-pack answer's status onto transport errors.
func v2Status(resp *http.Response) error {
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return transport.ErrAuthenticationRequired
	case resp.StatusCode == http.StatusForbidden:
		return transport.ErrAuthorizationFailed
	case resp.StatusCode == http.StatusNotFound:
		return transport.ErrRepositoryNotFound
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%w: http %d", ErrCheckUnsupported, resp.StatusCode)
	case resp.Header.Get("Content-Type") != "application/x-git-upload-pack-result":
		return fmt.Errorf("%w: answer of type %q", ErrCheckUnsupported, resp.Header.Get("Content-Type"))
	}
	return nil
}

// fileV2 is a file remote served by `git upload-pack` in protocol v2: it first advertises
// its capabilities (read and dropped), then answers one command.
type fileV2 struct {
	git, path string
}

func (f *fileV2) command(ctx context.Context, body []byte) (io.ReadCloser, error) {
	cmd := exec.CommandContext(ctx, f.git, "upload-pack", "--strict", f.path)
	cmd.Env = append(os.Environ(), "GIT_PROTOCOL=version=2", "GIT_TERMINAL_PROMPT=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start git upload-pack: %w", err)
	}
	br := bufio.NewReaderSize(out, 64<<10)
	v2 := false
	for {
		line, flush, err := readPkt(br)
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("git upload-pack %s: %w: %s", f.path, err, strings.TrimSpace(stderr.String()))
		}
		if flush {
			break
		}
		v2 = v2 || string(line) == "version 2\n"
	}
	if !v2 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, errFetchV2Unsupported
	}
	if _, err := in.Write(body); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return &procReader{Reader: br, in: in, cmd: cmd, stderr: &stderr}, nil
}

// procReader is upload-pack's answer; Close ends the process.
type procReader struct {
	io.Reader
	in     io.Closer
	cmd    *exec.Cmd
	stderr *bytes.Buffer
}

func (p *procReader) Close() error {
	_ = p.in.Close()
	_, _ = io.Copy(io.Discard, p.Reader)
	return p.cmd.Wait()
}
