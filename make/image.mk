# Container images without a daemon (internal/devtools/ociimage, from the
# declarations in internal/imagebuild): otelcol-loop and
# otelcol-loop-gateway for linux/amd64 and linux/arm64, one OCI image index
# each, under _build/ (oci/<image>/ layouts, docker/<image>-linux-<arch>.tar
# for `docker load`, images.json with the digests). The same commit gives the
# same digests. Cold: four cross builds of the collector, ~6-10 min on 2
# cores; warm (Go build cache): ~1 min, the links and the gzip.
IMAGE_OUT := $(CURDIR)/_build
IMAGE_REPOSITORY ?= ghcr.io/otelcol-loop

.PHONY: image test-image deploy-generate

image:
	cd internal/devtools && $(GO) run ./cmd/imagebuild -root $(CURDIR) -out $(IMAGE_OUT) -repository $(IMAGE_REPOSITORY)

# The image checks (internal/devtools/ociimage) run in test-unit's devtools step
# and read the images `make image` just built instead of cross-compiling
# their own; only the reproducibility check builds a second time (warm: the
# links) and compares digests.
test-unit: image
test-unit: export OTELCOL_LOOP_IMAGES ?= $(IMAGE_OUT)

# Only the image checks, verbose.
test-image: image
	$(GO) test -count=1 -v ./internal/imagebuild/
	cd internal/devtools && OTELCOL_LOOP_IMAGES=$(IMAGE_OUT) $(GO) test -count=1 -v ./ociimage/

# bin/otelcol-loop and bin/otelcol-loop-gateway (which test-unit builds for
# the other process-level tests) are built static too, so their compiled
# packages are the linux/amd64 image binaries' (one cold compile, not two).
build-distribution gateway: export CGO_ENABLED = 0

# The Helm values (deploy/helm/) and the Operator resource (deploy/operator/)
# are generated from deploy/kubernetes/ and config/gateway-k8s.yaml; run this
# after changing those (a test in internal/deploygen fails until you do).
deploy-generate:
	$(GO) run ./internal/deploygen/cmd/deploygen -root $(CURDIR)

clean: clean-image
.PHONY: clean-image
clean-image:
	rm -rf $(IMAGE_OUT)
