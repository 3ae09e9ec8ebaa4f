# Lab image only: stands for the ROCm paths and gfx1151 switches kyuz0's image sets in
# /etc/profile.d, which only a login shell reads. The serve tests check Ray and vLLM see these.
export HALO_LAB_IMAGE_PROFILE=read
export TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL=1
