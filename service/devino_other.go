//go:build !unix

package service

import "os"

func fileDevIno(*os.File) (dev, ino uint64, ok bool) { return 0, 0, false }
