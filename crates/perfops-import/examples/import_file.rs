//! `cargo run --release -p perfops-import --example import_file -- FILE`:
//! the access-log import of FILE with default options, without the binary
//! around it, for measuring lines per second and peak memory
//! (`/usr/bin/time -v`) on a large log with a release build of this crate
//! alone. Prints the summary and the scenario's size.

#![allow(clippy::print_stdout, missing_docs)]

use std::time::Instant;

fn main() {
    let Some(file) = std::env::args().nth(1) else {
        println!("usage: import_file FILE");
        std::process::exit(2);
    };
    let started = Instant::now();
    match perfops_import::access_log::import(std::path::Path::new(&file), &Default::default()) {
        Ok(imported) => {
            let secs = started.elapsed().as_secs_f64();
            for line in &imported.summary {
                println!("{line}");
            }
            let yaml = imported.draft.render();
            println!("scenario: {} bytes, {} feeder files; {secs:.1} s", yaml.len(), imported.files.len());
        }
        Err(e) => {
            println!("error: {e}");
            std::process::exit(2);
        }
    }
}
