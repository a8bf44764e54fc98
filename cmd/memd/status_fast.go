package main

// The fast path for `memd status`: its init runs before the heavy packages' inits and
// answers the common case, exiting before they cost anything (see internal/fastpath).
import _ "github.com/memd-dev/memd/internal/fastpath"
