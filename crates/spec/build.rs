// The built-in tasks are embedded with include_dir!, which cannot tell cargo to watch them.
fn main() {
    println!("cargo:rerun-if-changed=../../tasks");
}
