#version 450
// Moves the decode position in GPU memory one step on: state[0] += 1. The last
// dispatch of a decode step, so the same recorded step serves the next position.
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer BufState { int state[]; };
void main()
{
    state[0] += 1;
}
