#version 450
// Placeholder: LSH attention is being written (attention_lsh.c).
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Buf { uint data[]; };
void main() { data[0] = data[0]; }
