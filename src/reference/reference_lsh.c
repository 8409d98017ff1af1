/* Plain-C reference of LSH attention: placeholder, being written. */
typedef int reference_lsh_placeholder;
