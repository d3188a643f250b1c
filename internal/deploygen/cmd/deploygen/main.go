// Command deploygen rewrites the Helm values files and the Operator resource
// from deploy/kubernetes and config/ (`make deploy-generate`): see package
// internal/deploygen.
package main

import (
	"flag"
	"log"

	"github.com/otelcol-loop/otelcol-loop/internal/deploygen"
)

func main() {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	if err := deploygen.Write(*root); err != nil {
		log.Fatalf("deploygen: %v", err)
	}
}
