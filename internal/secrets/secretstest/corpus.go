// Package secretstest builds, at test time, a corpus of memories and ledger records that
// carry realistic credentials of the main kinds, and clean look-alikes beside them. No
// secret is written in this repo as a literal (each is put together from parts and random
// characters when a test runs), so no scanner flags the repo itself.
package secretstest

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
)

// Corpus is a set of files for a memory repo: memories (html) and one ledger.
type Corpus struct {
	Files map[string]string // repo-relative path → content
	// Dirty are the memory files with a secret; Clean the ones without.
	Dirty, Clean []string
	// DirtyRecords and CleanRecords are the ledger's record ids, with and without.
	DirtyRecords, CleanRecords []string
	// Secrets are the secrets' texts, for tests that prove they went nowhere.
	Secrets []string
	Ledger  string // the ledger's path
}

// alphabets
const (
	upper32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	alnum   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b64     = alnum + "+/"
	digits  = "0123456789"
)

func pick(r *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// Kinds of secret, each a function of the random source.
var kinds = []struct {
	name string
	make func(r *rand.Rand) string
}{
	{"aws", func(r *rand.Rand) string { return "AK" + "IA" + pick(r, upper32, 16) }},
	{"github", func(r *rand.Rand) string { return "gh" + "p_" + pick(r, alnum, 36) }},
	{"slack", func(r *rand.Rand) string {
		return "xo" + "xb-" + pick(r, digits, 12) + "-" + pick(r, digits, 13) + "-" + pick(r, alnum, 24)
	}},
	{"private-key", func(r *rand.Rand) string {
		var b strings.Builder
		b.WriteString("-----BEGIN RSA " + "PRIVATE KEY-----\n")
		for range 6 {
			b.WriteString(pick(r, b64, 64) + "\n")
		}
		b.WriteString("-----END RSA " + "PRIVATE KEY-----")
		return b.String()
	}},
	{"url-password", func(r *rand.Rand) string {
		return "https://backup.internal.example.net/upload?user=deploy&passw" + "ord=" + pick(r, alnum, 12) + "Q9x" + pick(r, alnum, 12)
	}},
}

// Look-alikes no rule should flag: documentation examples, placeholders, public keys.
var lookAlikes = []string{
	"AK" + "IAIOSFODNN7EXAMPLE",
	"gh" + "p_" + "your-token-here",
	"xo" + "xb-your-slack-token",
	"-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
	"postgres://user:password@localhost:5432/dev",
	"the api key lives in the vault, never in a memory",
}

// New builds a corpus from seed: for each kind a memory and a ledger record with one such
// secret, and as many clean memories and records (the look-alikes and plain notes).
func New(seed uint64) *Corpus {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	c := &Corpus{Files: map[string]string{}, Ledger: "memory.jsonl"}
	var ledger strings.Builder
	rec := func(id, text string) {
		fmt.Fprintf(&ledger, `{"id":%q,"type":"note","role":"agent","text":%q,"createdAt":"2026-12-01T10:00:00Z"}`+"\n", id, text)
	}
	for i, k := range kinds {
		s := k.make(r)
		c.Secrets = append(c.Secrets, s)
		p := fmt.Sprintf("areas/leak-%s.html", k.name)
		c.Files[p] = memory("Deploy notes "+k.name, "The agent saw this while fixing the deploy:\n"+s+"\n")
		c.Dirty = append(c.Dirty, p)
		id := fmt.Sprintf("r-leak-%d", i)
		rec(id, "credential seen in the terminal: "+s)
		c.DirtyRecords = append(c.DirtyRecords, id)
	}
	for i, l := range lookAlikes {
		p := fmt.Sprintf("areas/clean-%d.html", i)
		c.Files[p] = memory(fmt.Sprintf("Look-alike %d", i), "An example from the docs: "+l+"\n")
		c.Clean = append(c.Clean, p)
		id := fmt.Sprintf("r-clean-%d", i)
		rec(id, "docs example: "+l)
		c.CleanRecords = append(c.CleanRecords, id)
	}
	c.Files[c.Ledger] = ledger.String()
	sort.Strings(c.Dirty)
	sort.Strings(c.Clean)
	return c
}

func memory(title, body string) string {
	return "<!doctype html>\n<html><head><title>" + title + "</title></head>\n<body>\n<h1>" + title +
		"</h1>\n<pre>\n" + body + "</pre>\n</body></html>\n"
}
