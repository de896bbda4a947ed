/* The bare encoder for `make bench`: libx264 (the same shared library Sluice links) encoding
 * frames of a raw yuv420p file with the settings Sluice opens it with (preset, zerolatency,
 * endless GOP, no B-frames, Annex B, one thread, ABR + VBV), nothing else. Prints JSON with
 * its CPU time. Frames are read with fread into x264's picture, as an encoding tool does.
 *
 *   x264_bare RAW WIDTH HEIGHT FPS FRAMES BITRATE_KBPS VBV_MAX_KBPS VBV_BUF_KBIT PRESET REFS
 *             RECONFIG [RATES]
 * RECONFIG 1: call x264_encoder_reconfig before a frame whose rate differs from the last one
 * (as Sluice does); frame i's rate is "kbps vbv_max_kbps vbv_buf_kbit" on line i of RATES (a
 * Sluice run's own per-frame rate control, to encode what it encoded), else the fixed one. Frame i of the session is frame i of the file played forwards
 * and backwards, as Sluice plays a clip. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <x264.h>

static double cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static long clip_frame(long i, long n) {
    if (n <= 1) return 0;
    long period = 2 * (n - 1), k = i % period;
    return k < n ? k : period - k;
}

int main(int argc, char **argv) {
    if (argc != 12 && argc != 13) {
        fprintf(stderr, "usage: %s RAW W H FPS FRAMES KBPS VBV_MAX_KBPS VBV_BUF_KBIT PRESET REFS "
                        "RECONFIG [RATES]\n", argv[0]);
        return 2;
    }
    const char *raw = argv[1];
    int w = atoi(argv[2]), h = atoi(argv[3]), fps = atoi(argv[4]);
    long frames = atol(argv[5]);
    int kbps = atoi(argv[6]), vbv_max = atoi(argv[7]), vbv_buf = atoi(argv[8]);
    const char *preset = argv[9];
    int refs = atoi(argv[10]), reconfig = atoi(argv[11]);

    FILE *rates = argc == 13 ? fopen(argv[12], "r") : NULL;
    if (argc == 13 && !rates) { perror(argv[12]); return 1; }
    FILE *f = fopen(raw, "rb");
    if (!f) { perror(raw); return 1; }
    fseek(f, 0, SEEK_END);
    long frame_bytes = (long)w * h * 3 / 2;
    long n = ftell(f) / frame_bytes;
    if (n < 1) { fprintf(stderr, "%s: no frame of %dx%d\n", raw, w, h); return 1; }

    x264_param_t p;
    if (x264_param_default_preset(&p, preset, "zerolatency") < 0) return 1;
    p.i_log_level = X264_LOG_ERROR;
    p.i_width = w; p.i_height = h; p.i_csp = X264_CSP_I420;
    p.i_fps_num = fps; p.i_fps_den = 1; p.i_timebase_num = 1; p.i_timebase_den = fps;
    p.b_vfr_input = 0; p.i_threads = 1;
    p.i_keyint_max = X264_KEYINT_MAX_INFINITE; p.i_scenecut_threshold = 0;
    p.b_intra_refresh = 0; p.i_frame_reference = refs; p.i_bframe = 0;
    p.b_annexb = 1; p.b_repeat_headers = 1;
    p.rc.i_rc_method = X264_RC_ABR; p.rc.i_bitrate = kbps;
    p.rc.i_vbv_max_bitrate = vbv_max; p.rc.i_vbv_buffer_size = vbv_buf;
    x264_t *enc = x264_encoder_open(&p);
    if (!enc) { fprintf(stderr, "x264_encoder_open failed\n"); return 1; }

    x264_picture_t pic, out;
    if (x264_picture_alloc(&pic, X264_CSP_I420, w, h) < 0) return 1;
    double t0 = cpu_s();
    long long bytes = 0;
    for (long i = 0; i < frames; i++) {
        fseek(f, clip_frame(i, n) * frame_bytes, SEEK_SET);
        if (fread(pic.img.plane[0], 1, (size_t)w * h, f) != (size_t)w * h ||
            fread(pic.img.plane[1], 1, (size_t)w * h / 4, f) != (size_t)w * h / 4 ||
            fread(pic.img.plane[2], 1, (size_t)w * h / 4, f) != (size_t)w * h / 4) {
            fprintf(stderr, "short read\n");
            return 1;
        }
        int last[3] = {kbps, vbv_max, vbv_buf};
        if (rates && fscanf(rates, "%d %d %d", &kbps, &vbv_max, &vbv_buf) != 3) {
            fprintf(stderr, "%s: no rate for frame %ld\n", argv[12], i);
            return 1;
        }
        if (reconfig && (last[0] != kbps || last[1] != vbv_max || last[2] != vbv_buf)) {
            x264_param_t q;
            x264_encoder_parameters(enc, &q);
            q.rc.i_bitrate = kbps; q.rc.i_vbv_max_bitrate = vbv_max; q.rc.i_vbv_buffer_size = vbv_buf;
            x264_encoder_reconfig(enc, &q);
        }
        pic.i_pts = i;
        x264_nal_t *nals;
        int nnal;
        int size = x264_encoder_encode(enc, &nals, &nnal, &pic, &out);
        if (size < 0) return 1;
        bytes += size;
    }
    double cpu = cpu_s() - t0;
    x264_encoder_close(enc);
    x264_picture_clean(&pic);
    fclose(f);
    printf("{\"frames\": %ld, \"bytes\": %lld, \"cpu_s\": %.4f, \"bitrate_bps\": %.1f}\n", frames,
           bytes, cpu, bytes * 8.0 * fps / frames);
    return 0;
}
