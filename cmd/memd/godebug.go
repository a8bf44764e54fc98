// The Go runtime re-reads the CPU affinity and the cgroup CPU limit in the background to
// follow GOMAXPROCS to them (Go 1.25's updatemaxprocs), which wakes an idle daemon every few
// seconds: measured on an idle `memd run`, 0.90 voluntary context switches a second with it,
// 0.47 without (issue 29: at most 1 a second idle). memd needs a core at most; GOMAXPROCS is
// still set from the limits at start.
//go:debug updatemaxprocs=0

package main
