// Descriptors: the immutable fields a primitive is built from, each declared once. A
// descriptor's header lists its fields in one X-macro, F(type, name) per field;
// FUSEBRIDGE_DESCRIPTOR turns the list into the struct's members and a visitor over them, which
// module.cpp's bind_descriptor binds as a Python class (construction by field, read-only
// fields, ==, hash): kernels.GRUDescriptor and the others are those classes, and the primitive
// cache keys on them, so no field is written a second time in Python.
#pragma once

#define FUSEBRIDGE_DESCRIPTOR_MEMBER(type, name) type name;
#define FUSEBRIDGE_DESCRIPTOR_VISIT(type, name) v(#name, &Self::name);

// Inside `struct Type { ... }`: the members, then Type::for_each_field(v), which calls
// v("name", &Type::name) for every field in declaration order.
#define FUSEBRIDGE_DESCRIPTOR(Type, FIELDS)                 \
    FIELDS(FUSEBRIDGE_DESCRIPTOR_MEMBER)                    \
    using Self = Type;                                      \
    template <class V>                                      \
    static void for_each_field(V&& v) {                     \
        FIELDS(FUSEBRIDGE_DESCRIPTOR_VISIT)                 \
    }
