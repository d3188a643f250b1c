# The first hour of a new user: `make build` builds every binary the README
# names, and a cold build says that it will be quiet for a while.

.PHONY: demowatch build-notice

# bin/demowatch, the readable live view of verdicts (README "Watch your own agent").
binaries: demowatch
demowatch:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/demowatch ./scripts/demowatch

# Printed before the distribution is compiled for the first time.
build-distribution: build-notice
build-notice:
	@[ -x $(OTELCOL) ] || echo "Building bin/otelcol-loop for the first time: the whole collector is compiled" \
		"(about 12 minutes on a cold 2-core machine, with no output meanwhile); later builds take seconds."
