//! JUnit XML of a run's verdict, for CI systems that show test reports: one
//! test suite per stage, one test case per SLO line, and one for the stage's
//! own verdict (achieved rate and probes). A stage the generator could not
//! judge (inconclusive) or that never ran is reported as skipped, not passed.
//! A run that an `abort_when` rule stopped has a suite `abort_when` with one
//! failing case, the rule: the run failed (exit 1), and a panel of skipped
//! stages alone read green beside a red job.

use std::fmt::Write;

use perfops_core::analysis::verdict::StageVerdict;

use crate::format::xml_attr as esc;
use crate::run::{RunSummary, StageSummary, slo_value};

/// The JUnit XML document for `summary`.
pub fn render(summary: &RunSummary) -> String {
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let aborted = usize::from(summary.aborted.is_some());
    let cases: usize = summary.stages.iter().map(|s| s.slo.len() + 1).sum::<usize>() + aborted;
    let failures: usize = summary.stages.iter().map(stage_failures).sum::<usize>() + aborted;
    let _ = writeln!(
        o,
        "<testsuites name=\"perfops {}\" tests=\"{cases}\" failures=\"{failures}\" time=\"{:.3}\">",
        esc(&summary.name),
        summary.elapsed_s
    );
    for st in &summary.stages {
        let f = &st.figures;
        let skipped = matches!(st.verdict, Some(StageVerdict::Inconclusive | StageVerdict::NotRun));
        let _ = writeln!(
            o,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3}\">",
            esc(&f.name),
            st.slo.len() + 1,
            stage_failures(st),
            if skipped { st.slo.len() + 1 } else { 0 },
            f.duration_s
        );
        let class = format!("perfops.{}.{}", summary.name, f.name);
        let skip_reason = st.reasons.join("; ");
        for c in &st.slo {
            let measured =
                c.value.map_or("nothing measured".to_string(), |v| format!("measured {}", slo_value(&c.slo, v)));
            case(&mut o, &class, &c.slo, skipped.then_some(&skip_reason), (!c.passed && !skipped).then_some(&measured));
        }
        let why = st.reasons.join("; ");
        let fails = st.verdict == Some(StageVerdict::Fails);
        case(&mut o, &class, "stage holds", skipped.then_some(&skip_reason), fails.then_some(&why));
        o.push_str("  </testsuite>\n");
    }
    if let Some(rule) = &summary.aborted {
        let _ =
            writeln!(o, "  <testsuite name=\"abort_when\" tests=\"1\" failures=\"1\" skipped=\"0\" time=\"0.000\">");
        case(
            &mut o,
            &format!("perfops.{}", summary.name),
            "abort_when",
            None,
            Some(&format!("stopped by abort_when: {rule}")),
        );
        o.push_str("  </testsuite>\n");
    }
    o.push_str("</testsuites>\n");
    o
}

/// Failed cases of a stage: its missed SLO lines and its own verdict.
fn stage_failures(st: &StageSummary) -> usize {
    if st.verdict == Some(StageVerdict::Fails) { st.slo.iter().filter(|c| !c.passed).count() + 1 } else { 0 }
}

fn case(o: &mut String, class: &str, name: &str, skipped: Option<&String>, failure: Option<&String>) {
    let _ = write!(o, "    <testcase classname=\"{}\" name=\"{}\"", esc(class), esc(name));
    match (skipped, failure) {
        (Some(why), _) => {
            let _ = writeln!(o, "><skipped message=\"{}\"/></testcase>", esc(why));
        }
        (None, Some(why)) => {
            let _ = writeln!(o, "><failure message=\"{}\"/></testcase>", esc(why));
        }
        (None, None) => o.push_str("/>\n"),
    }
}
