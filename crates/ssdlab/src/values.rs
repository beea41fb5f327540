//! clap's value enums mapped onto the libraries' own types, so commands hand plans typed values. One `From` per
//! enum; the libraries never know clap.

use ssdlab_app::fanout::Mode;
use ssdlab_app::scan::ReaderChoice;
use ssdlab_core::schema::replay::{ReplayFit, TraceFormat};
use ssdlab_methods::erase::EraseMethod;
use ssdlab_methods::latency::LatencyRw;
use ssdlab_methods::pts::{PtsFlavour, PtsTest};
use ssdlab_methods::sweep::SweepAxis;
use ssdlab_sim::ftl::GcPolicy;
use ssdlab_trace::synth::Profile;

use crate::cli::{
    EngineArg, EraseMethodArg, FanoutModeArg, GcPolicyArg, LatencyRwArg, PtsFlavourArg, PtsTestArg,
    ReaderArg, ReplayFitArg, SweepAxisArg, SynthProfileArg, TraceFormatArg,
};

/// `impl From<clap's enum> for the library's type`, variant by variant.
macro_rules! value_map {
    ($from:ident => $to:ty { $($variant:ident => $value:expr),+ $(,)? }) => {
        impl From<$from> for $to {
            fn from(value: $from) -> $to {
                match value {
                    $($from::$variant => $value),+
                }
            }
        }
    };
}

value_map!(EngineArg => ssdlab_io::Engine {
    Auto => ssdlab_io::Engine::Auto,
    IoUring => ssdlab_io::Engine::IoUring,
    Psync => ssdlab_io::Engine::Psync,
});

// `auto` is no method: the best the device offers.
value_map!(EraseMethodArg => Option<EraseMethod> {
    Auto => None,
    Sanitize => Some(EraseMethod::Sanitize),
    SecureErase => Some(EraseMethod::SecureErase),
    Secdiscard => Some(EraseMethod::SecDiscard),
    Discard => Some(EraseMethod::Discard),
    Zero => Some(EraseMethod::Zero),
});

value_map!(FanoutModeArg => Mode {
    Computed => Mode::Computed,
    Measured => Mode::Measured,
});

value_map!(ReaderArg => ReaderChoice {
    Cat => ReaderChoice::Cat,
    Chunks => ReaderChoice::Chunks,
});

value_map!(TraceFormatArg => TraceFormat {
    FioIolog => TraceFormat::FioIolog,
    Blkparse => TraceFormat::Blkparse,
    Msr => TraceFormat::Msr,
});

value_map!(ReplayFitArg => ReplayFit {
    Fold => ReplayFit::Fold,
    Scale => ReplayFit::Scale,
});

value_map!(SynthProfileArg => Profile {
    Light => Profile::Light,
    Heavy => Profile::Heavy,
});

value_map!(SweepAxisArg => SweepAxis {
    Size => SweepAxis::Size,
    Qd => SweepAxis::Qd,
    Mix => SweepAxis::Mix,
});

value_map!(GcPolicyArg => GcPolicy {
    Greedy => GcPolicy::Greedy,
    CostBenefit => GcPolicy::CostBenefit,
});

value_map!(PtsTestArg => PtsTest {
    Iops => PtsTest::Iops,
    Throughput => PtsTest::Throughput,
    Latency => PtsTest::Latency,
});

value_map!(PtsFlavourArg => PtsFlavour {
    Enterprise => PtsFlavour::Enterprise,
    Client => PtsFlavour::Client,
});

value_map!(LatencyRwArg => LatencyRw {
    Randwrite => LatencyRw::RandWrite,
    Randread => LatencyRw::RandRead,
    Read => LatencyRw::Read,
    Write => LatencyRw::Write,
    Randrw => LatencyRw::RandRw,
});
