//go:build !unix

// Command loopsupervisor needs Unix process groups.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "loopsupervisor: process groups are required; this platform is not supported")
	os.Exit(2)
}
