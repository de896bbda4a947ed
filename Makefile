# Sluice: `make demo` and `make test` are the two entry points (see README.md).
# Everything the build needs is installed by `make setup` (called by both).

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
SLUICE := $(VENV)/bin/sluice
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(VENV))/bin:$(HOME)/.cargo/bin:$(PATH)
DEMO_TRACE ?= data/traces/wifi-hairpin14-70s.mahi
DEMO_SCHEMES ?= webrtc,webrtc-b,always-burst,ace
DEMO_DURATION ?= 60
DEMO_VIDEO ?= data/videos/bbb-intro_1280x720_24fps_10s.mp4
DEMO_VIDEO_SCHEMES ?= webrtc-x264,cbr,always-burst,ace

.PHONY: setup build demo test test-rust test-python lint bench bench-encoder clean check-fresh

setup: $(VENV)/.deps-ok

# System packages (Debian) and the Python environment. Idempotent; only installs what is missing.
$(VENV)/.deps-ok: pyproject.toml scripts/setup.sh
	@bash scripts/setup.sh $(VENV)
	touch $@

build: setup
	@echo "building the Rust core and the Python extension (log: $(VENV)/build.log)"
	@maturin develop --release > $(VENV)/build.log 2>&1 || { tail -n 30 $(VENV)/build.log >&2; exit 1; }
	@$(PY) -c "import sluice._core" || { echo "sluice: the extension module did not build" >&2; exit 1; }

demo: build
	$(SLUICE) compare --schemes $(DEMO_SCHEMES) --encoder model --trace $(DEMO_TRACE) \
		--duration $(DEMO_DURATION) --delay-ms 20 --queue-bytes 100000 --out results/demo
	$(SLUICE) compare --schemes $(DEMO_VIDEO_SCHEMES) --video $(DEMO_VIDEO) --width 640 \
		--trace $(DEMO_TRACE) --duration 20 --delay-ms 20 --queue-bytes 100000 \
		--encode-time modeled --quality fast --out results/demo-video
	@echo
	@echo "Demo results: results/demo and results/demo-video (compare.md, latency_cdf.png, timeseries.png)"

test: build lint test-rust test-python

# The x264 tests decode with imageio-ffmpeg's ffmpeg (it has libvmaf; no system ffmpeg needed).
test-rust: setup
	SLUICE_FFMPEG="$$($(PY) -c 'import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())')" \
		cargo test --workspace --release -q 2>&1 | tail -n 40; exit $${PIPESTATUS[0]}

test-python: build
	$(PY) -m pytest -q tests/python

lint: setup
	cargo clippy --workspace --all-targets --release -q -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q
	$(VENV)/bin/ruff check python tests bench scripts

bench: build
	$(PY) bench/run.py --out bench/out/bench.json

# libx264 characterisation (about 4 minutes on 2 cores): bench/out/encoder.json and PNGs.
bench-encoder: build
	$(PY) bench/encoder.py --out bench/out/encoder.json

# ACE (SIGCOMM '25) §6 reproduction: runs the matrices of experiments/ace.toml (960 px, three
# clips) and experiments/ace-1080p.toml (the paper's 1080p, the driving clip) (resumable:
# results/ace*, about 45 minutes on 2 cores) and writes docs/results/ace.md, ace-runs.csv and
# img/ace-*.png. ACE_ARGS go to `sluice matrix`, e.g. ACE_ARGS="--jobs 2 --rerun stale".
# ace-report-quick: the tiny experiments/ace-quick.toml, report in results/ace-quick/report.
.PHONY: ace-report ace-report-quick
ACE_ARGS ?=
ace-report: build
	$(SLUICE) matrix experiments/ace.toml $(ACE_ARGS)
	$(SLUICE) matrix experiments/ace-1080p.toml $(ACE_ARGS)
	$(PY) -m sluice.analysis.ace results/ace --hd results/ace-1080p --report-dir docs/results

ace-report-quick: build
	$(SLUICE) matrix experiments/ace-quick.toml $(ACE_ARGS)
	$(PY) -m sluice.analysis.ace results/ace-quick

# MAE (NSDI '26) reproduction: runs experiments/mae.toml (x264, about 40 minutes on 2 cores),
# experiments/mae-model.toml (model encoder, about 15 minutes), experiments/mae-clips.toml
# (x264 on three more clips, about 20 minutes) and the held-out check
# experiments/checks/mae-heldout.toml (x264, about 10 minutes), all resumable, and writes
# docs/results/mae.md, mae-runs.csv and img/mae-*.png. MAE_ARGS go to `sluice matrix`.
.PHONY: mae-report
MAE_ARGS ?=
mae-report: build
	$(SLUICE) matrix experiments/mae.toml $(MAE_ARGS)
	$(SLUICE) matrix experiments/mae-model.toml $(MAE_ARGS)
	$(SLUICE) matrix experiments/mae-clips.toml $(MAE_ARGS)
	$(SLUICE) matrix experiments/checks/mae-heldout.toml $(MAE_ARGS)
	$(PY) -m sluice.analysis.mae results/mae results/mae-model --clips results/mae-clips \
		--heldout results/mae-heldout --report-dir docs/results

# Vidaptive (NINeS '26) §5 reproduction: the model-encoder matrix of experiments/vidaptive.toml
# and the small libx264 one of experiments/vidaptive-x264.toml (resumable: results/vidaptive*,
# about 20-25 minutes with one job on two shared cores), then docs/results/vidaptive.md,
# vidaptive-runs.csv and img/vidaptive-*.png. VIDAPTIVE_ARGS go to `sluice matrix`.
.PHONY: vidaptive-report
VIDAPTIVE_ARGS ?= --jobs 1
vidaptive-report: build
	$(SLUICE) matrix experiments/vidaptive.toml $(VIDAPTIVE_ARGS)
	$(SLUICE) matrix experiments/vidaptive-x264.toml $(VIDAPTIVE_ARGS)
	$(PY) -m sluice.analysis.vidaptive results/vidaptive results/vidaptive-x264 \
		--report-dir docs/results

# Co-RTV §V-B reproduction: the model-encoder matrix of experiments/cortv.toml, the x264
# subset of experiments/cortv-x264.toml, Fig. 4's setting (experiments/cortv-fig4.toml) and
# the held-out check (experiments/checks/cortv-heldout.toml) (resumable; about 25 minutes
# with one job), then docs/results/cortv.md, its runs CSV and PNGs.
.PHONY: cortv-report
CORTV_ARGS ?= --jobs 1
cortv-report: build
	$(SLUICE) matrix experiments/cortv.toml $(CORTV_ARGS)
	$(SLUICE) matrix experiments/cortv-x264.toml $(CORTV_ARGS)
	$(SLUICE) matrix experiments/cortv-fig4.toml $(CORTV_ARGS)
	$(SLUICE) matrix experiments/checks/cortv-heldout.toml $(CORTV_ARGS)
	$(PY) -m sluice.analysis.cortv results/cortv results/cortv-x264 --fig4 results/cortv-fig4 \
		--heldout results/cortv-heldout --report-dir docs/results

# The README's two commands in a clean Debian root (debootstrap + chroot, as root; about
# 15 minutes): proves that setup installs everything a new user lacks. See scripts/check-fresh.sh.
check-fresh:
	bash scripts/check-fresh.sh

clean:
	cargo clean
	rm -rf $(VENV) results bench/out

# Sluice's combined scheme (issue 31): the leaderboard (with `combined`), its ablations, the
# candidates it was chosen from and the held-out checks (traces and clips from ../shared, which
# the project does not ship), then docs/results/combined.md.
.PHONY: combined-report
combined-report: build
	$(SLUICE) matrix experiments/leaderboard.toml --no-report $(LEADERBOARD_ARGS)
	$(SLUICE) matrix experiments/combined-ablations.toml --no-report $(LEADERBOARD_ARGS)
	$(SLUICE) matrix experiments/checks/combined-heldout.toml --no-report $(LEADERBOARD_ARGS)
	$(SLUICE) matrix experiments/combined-ablations-all.toml --no-report $(LEADERBOARD_ARGS)
	$(SLUICE) matrix experiments/combined-candidates.toml --no-report $(LEADERBOARD_ARGS)
	$(SLUICE) matrix experiments/checks/combined-candidates-heldout.toml --no-report \
		$(LEADERBOARD_ARGS)
	$(PY) -m sluice.analysis.combined results/leaderboard --ablations results/combined-ablations \
		--heldout results/combined-heldout --ablations-all results/combined-ablations-all \
		--candidates results/combined-candidates \
		--candidates-heldout results/combined-candidates-heldout --report-dir docs/results

# Sluice's `webrtc` against real Chromium (issue 25): runs experiments/chrome-fidelity.toml's
# missing cells (the live and browser ones in real time, one at a time, each browser cell three
# times: about 80 minutes) and writes docs/results/chrome.md, chrome-runs.csv and
# img/chrome-targets.png.
.PHONY: chrome-report
chrome-report: build
	$(PY) -m sluice.analysis.chrome experiments/chrome-fidelity.toml --report-dir docs/results

# The RMCAT evaluation test cases (RFC 8867 §5; issue 29): every plan of experiments/rmcat/
# (the baseline and the four systems, model encoder; resumable; under a minute), then
# docs/results/rmcat.md (pass/fail matrix, numbers, img/rmcat-*.png). RMCAT_ARGS go to
# `sluice matrix`.
.PHONY: rmcat
RMCAT_ARGS ?= --jobs 1
rmcat: build
	for p in experiments/rmcat/*.toml; do $(SLUICE) matrix $$p --no-report $(RMCAT_ARGS) || exit 1; done
	$(PY) -m sluice.analysis.rmcat results --report-dir docs/results

# libwebrtc's task-queue pacer runs against per-packet pacing (the schemes that pace with the
# leaky bucket, each with pacer.hold_back_window_ms 0 and 5, and ace and vidaptive for the
# headlines against webrtc; model encoder; about two minutes with two jobs), then
# docs/results/task-queue.md; where ../shared is there, also the four simulator sides of
# experiments/checks/chrome-pacing.toml (webrtc and webrtc-burst40, each with and without the
# task queue) against its Chromium runs (docs/results/chrome-pacing/chrome-runs.csv; the sides
# it lacks are run, x264 in the simulator).
.PHONY: task-queue-report
task-queue-report: build
	$(SLUICE) matrix experiments/webrtc-task-queue.toml --no-report --jobs 2
	$(PY) -m sluice.analysis.task_queue results/webrtc-task-queue --report-dir docs/results \
		$(if $(wildcard ../shared/videos),--chrome experiments/checks/chrome-pacing.toml \
		--chrome-csv docs/results/chrome-pacing/chrome-runs.csv)

# The same on the leaderboard's Wi-Fi and LTE x264 cells (webrtc-x264, mae and combined both ways,
# ace and vidaptive as registered; 144 runs of 60 s, about 40 minutes with two jobs), then
# docs/results/task-queue-x264.md.
.PHONY: task-queue-x264-report
task-queue-x264-report: build
	$(SLUICE) matrix experiments/leaderboard-task-queue.toml --no-report --jobs 2
	$(PY) -m sluice.analysis.task_queue results/leaderboard-task-queue --report-dir docs/results \
		--report-name task-queue-x264 --headline-baseline webrtc-x264

# The leaderboard (issue 27): experiments/leaderboard.toml's 864 cells (16 schemes, 18 trace
# windows in 6 families, 3 clips; resumable; about 3 hours with 2 jobs on 2 cores, see
# `make bench` for this machine's estimate), then docs/results/leaderboard.md and .html.
# LEADERBOARD_ARGS="--backend ray" runs it on a Ray cluster (docs/cluster.md).
.PHONY: leaderboard
LEADERBOARD_ARGS ?= --jobs 2
leaderboard: build
	$(SLUICE) matrix experiments/leaderboard.toml --no-report $(LEADERBOARD_ARGS)
	$(PY) -m sluice.analysis.leaderboard results/leaderboard --report-dir docs/results
