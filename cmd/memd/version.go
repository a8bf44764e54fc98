package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

func init() {
	register("version", "print version, commit and Go version", func(a *app, args []string) int {
		fs := a.flags("version", "")
		if err := fs.Parse(args); err != nil {
			return exitUsage
		}
		v, c := version, commit
		if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		fmt.Fprintf(a.stdout, "memd %s (commit %s, %s %s/%s)\n", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return exitOK
	})
}
