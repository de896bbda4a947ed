// Sluice's browser harness: one RTCPeerConnection per page (sender or receiver), signalled
// through the harness's local HTTP server (python/sluice/browser/server.py); every media and
// feedback datagram goes through Sluice's trace relay, whose address the server writes into
// the candidates. The pages record what the browser reports (getStats every 100 ms, each
// displayed frame's requestVideoFrameCallback metadata) and post it to the server in chunks.
"use strict";

const Sluice = (() => {
  const q = new URLSearchParams(location.search);
  const cfg = {
    token: q.get("token"),
    codec: (q.get("codec") || "vp8").toLowerCase(),
    width: +q.get("width"),
    height: +q.get("height"),
    fps: +q.get("fps"),
    statsMs: +(q.get("stats_ms") || 100),
    maxKbps: +(q.get("max_kbps") || 0),
    degradation: q.get("degradation") || "",
  };
  const ABS_CAPTURE_TIME = "http://www.webrtc.org/experiments/rtp-hdrext/abs-capture-time";
  const MIME = { vp8: "video/VP8", vp9: "video/VP9", h264: "video/H264", av1: "video/AV1" };
  const epoch = (t) => performance.timeOrigin + t; // ms since the Unix epoch
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  let role = "?";
  const pending = { frames: [], stats: [], events: [] };

  async function api(path, body) {
    const url = `/api/${path}?token=${encodeURIComponent(cfg.token)}`;
    const init = body === undefined ? {} :
      { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
    for (let attempt = 0; ; attempt++) {
      try {
        const r = await fetch(url, init);
        if (r.status === 204) return null;
        if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
        return await r.json();
      } catch (e) {
        if (attempt >= 5) throw e;
        await sleep(100);
      }
    }
  }

  // Waits until the server has `path` (it answers 204 until then).
  async function wait(path) {
    for (;;) {
      const v = await api(path);
      if (v !== null) return v;
      await sleep(20);
    }
  }

  function event(what, detail) {
    pending.events.push({ t_ms: epoch(performance.now()), what, detail: detail ?? null });
  }

  async function flush() {
    if (!pending.frames.length && !pending.stats.length && !pending.events.length) return;
    const chunk = { frames: pending.frames.splice(0), stats: pending.stats.splice(0),
                    events: pending.events.splice(0) };
    await api(`log/${role}`, chunk);
  }

  function fail(e) {
    event("error", String(e && e.stack || e));
    flush().catch(() => {});
  }

  // Adds the abs-capture-time extension to the video section, so the receiver's
  // requestVideoFrameCallback reports each frame's capture time from the sender's clock.
  function withAbsCaptureTime(sdp) {
    if (sdp.includes(ABS_CAPTURE_TIME)) return sdp;
    const used = new Set([...sdp.matchAll(/a=extmap:(\d+)/g)].map((m) => +m[1]));
    let id = 1;
    while (used.has(id)) id++;
    if (id > 14) return sdp; // no one-byte id left
    return sdp.replace(/(m=video[^\r\n]*\r\n)/, `$1a=extmap:${id} ${ABS_CAPTURE_TIME}\r\n`);
  }

  // Raises the codec's bitrate cap (Chromium caps a single 720p stream at 2.5 Mbps): the
  // payload types of `mime` get x-google-max-bitrate (kbps) in their fmtp lines.
  function withMaxBitrate(sdp, mime, kbps) {
    if (!kbps) return sdp;
    const name = mime.split("/")[1];
    const pts = [...sdp.matchAll(new RegExp(`a=rtpmap:(\\d+) ${name}/`, "gi"))].map((m) => m[1]);
    let out = sdp;
    for (const pt of pts) {
      const fmtp = new RegExp(`(a=fmtp:${pt} [^\\r\\n]*)`);
      if (fmtp.test(out)) {
        out = out.replace(fmtp, `$1;x-google-max-bitrate=${kbps}`);
      } else {
        out = out.replace(new RegExp(`(a=rtpmap:${pt} [^\\r\\n]*\\r\\n)`),
                          `$1a=fmtp:${pt} x-google-max-bitrate=${kbps}\r\n`);
      }
    }
    return out;
  }

  function gathered(pc) {
    if (pc.iceGatheringState === "complete") return Promise.resolve();
    return new Promise((resolve) => {
      pc.addEventListener("icegatheringstatechange", () => {
        if (pc.iceGatheringState === "complete") resolve();
      });
    });
  }

  function watch(pc) {
    pc.addEventListener("iceconnectionstatechange", () => event("ice", pc.iceConnectionState));
    pc.addEventListener("connectionstatechange", () => event("connection", pc.connectionState));
  }

  // getStats every statsMs: the reports the harness reads, each as its plain fields.
  function pollStats(pc) {
    const keep = new Set(["outbound-rtp", "inbound-rtp", "remote-inbound-rtp", "candidate-pair",
                          "media-source", "transport", "codec"]);
    setInterval(async () => {
      try {
        const t = epoch(performance.now());
        const reports = [];
        (await pc.getStats()).forEach((r) => {
          if (!keep.has(r.type)) return;
          if (r.type === "candidate-pair" && !(r.nominated || r.selected)) return;
          if ((r.type === "outbound-rtp" || r.type === "inbound-rtp") && r.kind !== "video") return;
          reports.push(Object.assign({}, r));
        });
        pending.stats.push({ t_ms: t, reports });
      } catch (e) { fail(e); }
    }, cfg.statsMs);
  }

  async function stopWhenTold(pc) {
    await wait("stop");
    event("stop");
    pc.close();
    await flush();
    await api(`done/${role}`, {});
  }

  async function sender() {
    role = "sender";
    try {
      const stream = await navigator.mediaDevices.getUserMedia({
        video: { width: { exact: cfg.width }, height: { exact: cfg.height },
                 frameRate: { exact: cfg.fps } },
        audio: false,
      });
      const track = stream.getVideoTracks()[0];
      event("capture", track.getSettings());
      const pc = new RTCPeerConnection({ bundlePolicy: "max-bundle" });
      watch(pc);
      const tr = pc.addTransceiver(track, { direction: "sendonly", streams: [stream] });
      const caps = RTCRtpSender.getCapabilities("video").codecs;
      const mime = MIME[cfg.codec];
      const first = caps.filter((c) => c.mimeType === mime);
      if (!first.length) throw new Error(`this browser cannot send ${cfg.codec}`);
      tr.setCodecPreferences([...first, ...caps.filter((c) => c.mimeType !== mime)]);
      if (cfg.maxKbps || cfg.degradation) {
        const p = tr.sender.getParameters();
        if (cfg.maxKbps) {
          p.encodings = (p.encodings && p.encodings.length ? p.encodings : [{}])
            .map((e) => Object.assign(e, { maxBitrate: cfg.maxKbps * 1000 }));
        }
        if (cfg.degradation) p.degradationPreference = cfg.degradation;
        await tr.sender.setParameters(p);
        event("parameters", tr.sender.getParameters());
      }
      const offer = await pc.createOffer();
      await pc.setLocalDescription({ type: "offer", sdp: withAbsCaptureTime(offer.sdp) });
      await gathered(pc);
      await api("offer", { sdp: pc.localDescription.sdp });
      const answer = await wait("answer");
      await pc.setRemoteDescription({
        type: "answer", sdp: withMaxBitrate(answer.sdp, mime, cfg.maxKbps) });
      event("negotiated", { codec: cfg.codec });
      pollStats(pc);
      setInterval(() => flush().catch(fail), 1000);
      await stopWhenTold(pc);
    } catch (e) { fail(e); }
  }

  async function receiver() {
    role = "receiver";
    try {
      // Without a media permission Chromium offers only the default route's address, not
      // loopback: ask for the (fake) camera once and let it go.
      const probe = await navigator.mediaDevices.getUserMedia({ video: true, audio: false });
      probe.getTracks().forEach((t) => t.stop());
      const video = document.getElementById("v");
      const pc = new RTCPeerConnection({ bundlePolicy: "max-bundle" });
      watch(pc);
      pc.addEventListener("track", (e) => {
        video.srcObject = e.streams[0] || new MediaStream([e.track]);
        video.play().catch(fail);
        event("track", e.track.kind);
      });
      const onFrame = (now, m) => {
        pending.frames.push({
          presented_frames: m.presentedFrames,
          rtp_timestamp: m.rtpTimestamp ?? null,
          capture_ms: m.captureTime !== undefined ? epoch(m.captureTime) : null,
          receive_ms: m.receiveTime !== undefined ? epoch(m.receiveTime) : null,
          expected_display_ms: epoch(m.expectedDisplayTime),
          presentation_ms: epoch(m.presentationTime),
          callback_ms: epoch(now),
          width: m.width,
          height: m.height,
          processing_s: m.processingDuration ?? null,
        });
        video.requestVideoFrameCallback(onFrame);
      };
      video.requestVideoFrameCallback(onFrame);
      const offer = await wait("offer");
      await pc.setRemoteDescription({ type: "offer", sdp: offer.sdp });
      const answer = await pc.createAnswer();
      await pc.setLocalDescription(answer);
      await gathered(pc);
      await api("answer", { sdp: pc.localDescription.sdp });
      const remote = await wait("candidate");
      await pc.addIceCandidate(remote);
      pollStats(pc);
      setInterval(() => flush().catch(fail), 1000);
      await stopWhenTold(pc);
    } catch (e) { fail(e); }
  }

  return { sender, receiver };
})();
