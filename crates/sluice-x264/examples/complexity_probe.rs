use sluice_core::encoder::Complexity;
use sluice_x264::complexity::analysis_for;
use sluice_x264::{I420Frame, X264Config, X264Encoder};
use std::io::Read;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = &args[1];
    let (w, h) = (640u32, 360u32);
    let bitrate: u64 = args[2].parse().unwrap();
    let every: u64 = args[3].parse().unwrap();
    let level = match args[4].as_str() {
        "c1" => Complexity::C1,
        "c2" => Complexity::C2,
        _ => Complexity::C0,
    };
    let vbv_ms: u64 = args.get(5).map_or(500, |s| s.parse().unwrap());
    let mut f = std::fs::File::open(path).unwrap();
    let mut cfg = X264Config::new(w, h, 30, bitrate);
    cfg.vbv_buffer_bits = bitrate * vbv_ms / 1000;
    let mut enc = X264Encoder::open(&cfg).unwrap();
    let mut frame = I420Frame::new_grey(w, h);
    let (mut tot, mut tot_sel, mut qp_sel, mut n_sel) = (0usize, 0usize, 0.0, 0);
    let mut t = std::time::Duration::ZERO;
    for i in 0..240u64 {
        f.read_exact(&mut frame.y).unwrap();
        f.read_exact(&mut frame.u).unwrap();
        f.read_exact(&mut frame.v).unwrap();
        let sel = i > 0 && i % every == 0;
        let lv = if sel { level } else { Complexity::C0 };
        enc.reconfigure_analysis(&analysis_for(lv)).unwrap();
        let p = enc.encode(&frame, false).unwrap();
        tot += p.data.len();
        t += p.encode_time;
        if sel {
            tot_sel += p.data.len();
            qp_sel += p.qp;
            n_sel += 1;
        }
        if args.get(6).is_some() {
            println!("{i} {} {:.1}", p.data.len(), p.qp);
        }
    }
    println!(
        "total {tot} selected {tot_sel} n {n_sel} mean_qp_sel {:.2} time {:?}",
        qp_sel / n_sel as f64,
        t
    );
}
