//! Write amplification over a grid of pages per block and over-provisioning, printed as a table for docs/sim.md.

// An example prints its table; the rule against printing is for the libraries.
#![allow(clippy::print_stdout)]

fn main() {
    for np in [32u32, 64, 256] {
        for op in [0.07, 0.125, 0.25, 0.5] {
            let t = std::time::Instant::now();
            let mut run = ssdlab_sim::wa::WaRun::new(op, np);
            run.logical_units = 1 << 18;
            let r = ssdlab_sim::wa::measure(&run);
            println!(
                "np {np:4} op {:.3} measured {:.4} model {:.4} err {:+.2}%  ({:.1}s)",
                r.op,
                r.write_amplification,
                r.model_write_amplification,
                100.0 * (r.write_amplification / r.model_write_amplification - 1.0),
                t.elapsed().as_secs_f64()
            );
        }
    }
}
