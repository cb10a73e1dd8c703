"""Reading a Truth back as plain Python lists per query, for the protocol tests."""


def per_query_lists(indptr, items):
    return [items[indptr[i]:indptr[i + 1]].tolist() for i in range(len(indptr) - 1)]


def relevant_lists(truth):
    return per_query_lists(truth.rel_indptr, truth.rel_items)


def junk_lists(truth):
    return per_query_lists(truth.junk_indptr, truth.junk_items)


def allowed_lists(truth):
    return per_query_lists(truth.allowed_indptr, truth.allowed_items)
