// The knowledge base is embedded with include_dir!, which cannot tell cargo to watch it.
fn main() {
    println!("cargo:rerun-if-changed=../../kb");
}
