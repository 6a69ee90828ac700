// A variable-length string's bytes lie in the file's global heap, in a
// "collection" of objects that libhdf5 1.10 walks from header to header
// before it reads one, trusting every size it finds: an object of size 0
// marked free makes the walk stand still (the reading process loops
// forever; session 59's fuzzing found one damaged byte of a Neuron
// Inverter file's `meta.JSON` doing that), and a size past the collection's
// end makes it copy from wild memory. The check below walks the collection
// the way libhdf5 will, from the file's bytes, before libhdf5 does -- so a
// damaged one is an error naming the file instead of a hang or a crash.
#pragma once

#include <hdf5.h>

#include <string>

namespace mrmf::data {

// Checks the global heap collection holding the value of `dataset`, a
// scalar or one-element variable-length string dataset (in the file it
// lies in: an external link's target); throws a Data error starting with
// `where` when the walk would not end exactly at the collection's end, or
// the string's object is missing or of another length than the dataset
// says. Returns
// without a verdict where the check does not apply (storage not contiguous
// or not allocated, addresses or lengths other than 8 bytes, a null
// string): libhdf5 reads those as before.
void check_vlen_string_heap(hid_t dataset, const std::string& where);

// Checks the character type under the variable-length string type `type`
// (a dataset's or attribute's): libhdf5 stores one-byte characters and, on
// reading, multiplies the string's length by the size it finds there -- a
// damaged size byte (16.7 million-byte characters, from session 61's
// fuzzing) made `mrmf downsample` run for ever on a 16-byte `meta.JSON`.
// Throws a Data error starting with `where` unless the characters are
// one-byte integers; returns at once for any other type.
void check_vlen_string_type(hid_t type, const std::string& where);

}  // namespace mrmf::data
