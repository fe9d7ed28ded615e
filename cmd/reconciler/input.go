package main

import (
	"io"
	"io/fs"
	"os"
)

// maxInputBytes caps every document the CLI reads: a snapshot, a template,
// a catalog document, a demo file. A larger input (or an endless one such
// as /dev/zero) is refused once the cap is passed, never read on.
const maxInputBytes = 4 << 20

// readInput reads file, or stdin for "-", up to maxInputBytes. Failures are
// usage errors naming the input.
func readInput(stdin io.Reader, file string) ([]byte, error) {
	if file == "-" {
		return readCapped(stdin, "stdin")
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, usageError{err}
	}
	defer f.Close()
	return readCapped(f, file)
}

// readInputFS is readInput for a file of fsys (the demo directory).
func readInputFS(fsys fs.FS, file, name string) ([]byte, error) {
	f, err := fsys.Open(file)
	if err != nil {
		return nil, usageError{err}
	}
	defer f.Close()
	return readCapped(f, name)
}

// readCapped reads r to its end, refusing more than maxInputBytes; name
// names the input in the error.
func readCapped(r io.Reader, name string) ([]byte, error) {
	src, err := io.ReadAll(io.LimitReader(r, maxInputBytes+1))
	if err != nil {
		return nil, usagef("read %s: %v", name, err)
	}
	if len(src) > maxInputBytes {
		return nil, usagef("%s: larger than %d bytes (4 MiB), the most the CLI reads", name, maxInputBytes)
	}
	return src, nil
}
