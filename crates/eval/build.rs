// The harness is embedded with include_dir!, which cannot tell cargo to watch it.
fn main() {
    println!("cargo:rerun-if-changed=../../harness/ksearch_harness");
    println!("cargo:rerun-if-changed=rules");
}
