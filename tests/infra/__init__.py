"""The verification (`halo-cluster verify`): pytest over this folder, which a wheel installs as
`halo_cluster.verification` (setup.py); its modules import each other relatively, so they run
under either name."""
