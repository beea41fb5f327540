//! One view per kind of result: its section of the page, its heading, the table a command says on stderr, its
//! headline figures, its tidy CSV and the phases whose latency it draws. Each kind's view is a unit type in the
//! module that draws it (`consistency::Consistency`, `scan::Scan`, ...), implementing [`View`]; the one
//! dispatch from a result to its view is generated here from the schema's list of methods
//! ([`ssdlab_core::for_each_method!`]) and the commands written out below it, so a method added to the list does
//! not compile until it has a view, and no kind falls through a `_ =>` arm.
//!
//! What this module must never do: draw anything itself (the views do), or match on a kind's name as a string.

use ssdlab_core::schema::{Analysis, RunResult};

use crate::figures::Figure;

/// How one kind of result is shown. Only the heading and the section are required: a kind without a table on
/// stderr, headline figures or a tidy CSV has none.
pub(crate) trait View {
    /// What the view draws from: the kind's analysis when it measured something.
    type Analysis: ?Sized;
    /// The section's heading in the page.
    const HEADING: &'static str;
    /// The section's opening paragraph: what was done, why a reviewer does it, and what to look for in the
    /// tables and charts below. Plain text; every kind has one, so no section opens on bare numbers.
    const STORY: &'static str;
    /// The phases whose latency distribution the page draws (fill and purge phases are preparation; "" is the
    /// first phase, whatever its name).
    const MEASURED_PHASES: &'static [&'static str] = &[];
    /// The section of the page for a group of results of this kind.
    fn section(group: &[&RunResult]) -> String;
    /// The table a command says on stderr.
    fn lines(_analysis: &Self::Analysis) -> Vec<String> {
        Vec::new()
    }
    /// The figures a reviewer quotes, for the ranking and the baseline table.
    fn figures(_result: &RunResult, _analysis: &Self::Analysis) -> Vec<Figure> {
        Vec::new()
    }
    /// One row per point, as (file name, CSV text), written beside result.json.
    fn tidy(_analysis: &Self::Analysis) -> Option<(&'static str, String)> {
        None
    }
}

/// Something done with a result's view: [`visit`] calls it with the view of the result's kind and the analysis
/// (None for a method interrupted before it measured anything).
pub(crate) trait Visit {
    type Out;
    fn visit<V: View>(self, analysis: Option<&V::Analysis>) -> Self::Out;
}

// The commands' views; the methods' are found by the list's module and type names.
use crate::erase::Erase;
use crate::fanout::Fanout;
use crate::health::Health;
use crate::op::Op;
use crate::refresh::Refresh;
use crate::region_scan::RegionScan;
use crate::run::Run;
use crate::scan::Scan;
use crate::serve::Serve;

macro_rules! define_visit {
    ($( $variant:ident $module:ident $kind:literal $options:ty, $analysis:ty; )*) => {
        /// Calls `visitor` with the view of `analysis`'s kind: the one dispatch on kinds in the report.
        pub(crate) fn visit<T: Visit>(analysis: &Analysis, visitor: T) -> T::Out {
            match analysis {
                Analysis::Run => visitor.visit::<Run>(Some(&())),
                $( Analysis::$variant(m) => visitor.visit::<crate::$module::$variant>(m.measured.as_ref()), )*
                Analysis::Scan(a) => visitor.visit::<Scan>(Some(a)),
                Analysis::RegionScan(a) => visitor.visit::<RegionScan>(Some(a)),
                Analysis::Health(a) => visitor.visit::<Health>(Some(a)),
                Analysis::Fanout(a) => visitor.visit::<Fanout>(Some(&**a)),
                Analysis::Refresh(a) => visitor.visit::<Refresh>(Some(a)),
                Analysis::Erase(a) => visitor.visit::<Erase>(Some(a)),
                Analysis::Op(a) => visitor.visit::<Op>(Some(a)),
                Analysis::Serve(a) => visitor.visit::<Serve>(Some(a)),
            }
        }
    };
}

ssdlab_core::for_each_method!(define_visit);

/// The heading of a kind's section.
pub(crate) fn heading(analysis: &Analysis) -> &'static str {
    struct Heading;
    impl Visit for Heading {
        type Out = &'static str;
        fn visit<V: View>(self, _: Option<&V::Analysis>) -> &'static str {
            V::HEADING
        }
    }
    visit(analysis, Heading)
}

/// The opening paragraph of a kind's section.
pub(crate) fn story(analysis: &Analysis) -> &'static str {
    struct Story;
    impl Visit for Story {
        type Out = &'static str;
        fn visit<V: View>(self, _: Option<&V::Analysis>) -> &'static str {
            V::STORY
        }
    }
    visit(analysis, Story)
}

/// The section of the page for `group`, results of one kind.
pub(crate) fn section(group: &[&RunResult]) -> String {
    struct Section<'g, 'r>(&'g [&'r RunResult]);
    impl Visit for Section<'_, '_> {
        type Out = String;
        fn visit<V: View>(self, _: Option<&V::Analysis>) -> String {
            V::section(self.0)
        }
    }
    group
        .first()
        .map_or_else(String::new, |first| visit(&first.analysis, Section(group)))
}

/// The headline figures of `result`.
pub(crate) fn figures(result: &RunResult) -> Vec<Figure> {
    struct Figures<'r>(&'r RunResult);
    impl Visit for Figures<'_> {
        type Out = Vec<Figure>;
        fn visit<V: View>(self, analysis: Option<&V::Analysis>) -> Vec<Figure> {
            analysis.map_or_else(Vec::new, |a| V::figures(self.0, a))
        }
    }
    visit(&result.analysis, Figures(result))
}

/// The phases whose latency `result`'s kind draws.
pub(crate) fn measured_phases(result: &RunResult) -> &'static [&'static str] {
    struct Phases;
    impl Visit for Phases {
        type Out = &'static [&'static str];
        fn visit<V: View>(self, _: Option<&V::Analysis>) -> &'static [&'static str] {
            V::MEASURED_PHASES
        }
    }
    visit(&result.analysis, Phases)
}

/// The result's tidy CSV as (file name, text), for kinds that have one.
pub fn tidy_csv(result: &RunResult) -> Option<(&'static str, String)> {
    struct Tidy;
    impl Visit for Tidy {
        type Out = Option<(&'static str, String)>;
        fn visit<V: View>(self, analysis: Option<&V::Analysis>) -> Self::Out {
            analysis.and_then(V::tidy)
        }
    }
    visit(&result.analysis, Tidy)
}

/// The table a method says on stderr once it has measured (nothing for one that measured nothing).
pub fn method_lines(analysis: &Analysis) -> Vec<String> {
    struct Lines;
    impl Visit for Lines {
        type Out = Vec<String>;
        fn visit<V: View>(self, analysis: Option<&V::Analysis>) -> Vec<String> {
            analysis.map_or_else(Vec::new, V::lines)
        }
    }
    visit(analysis, Lines)
}
