// Command gendemolog writes the access log docs/choosing.md replays,
// gzip-compressed, to the file it is given:
//
//	go run ./internal/cmd/gendemolog docs/choosing/access.log.gz
package main

import (
	"compress/gzip"
	"fmt"
	"os"

	"github.com/sluicehq/sluice/internal/demolog"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendemolog FILE.gz")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gendemolog:", err)
		os.Exit(1)
	}
}

func write(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return err
	}
	if err := demolog.Write(zw); err != nil {
		f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
