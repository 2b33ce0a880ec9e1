#pragma once
// JSON (nlohmann-json) for every enum that has a name table (core/enum_table.h). An enum whose
// table is declared with its NamesOf() (HasEnumTable) is written as the table's name and read
// back through the same table, so the codecs say
//
//   j["state"] = job.state;                         // "running"
//   job.state = j.at("state").get<JobState>();      // or the error below
//
// and the names on the wire are the ones the flags, the docs and the YAML readers use. Reading
// refuses a name the table does not list, with nlohmann's type_error 302 (what get<int>() on a
// string throws, so the codecs' `catch (const json::exception&)` reports it) whose message names
// what the field holds and every allowed name: "unknown job state 'bogus' (queued, assigned,
// ...)". A value that is not a string is refused the same way ("type must be string, but is
// number"). A value the table does not list is written as "?" (Name()); the round-trip test of
// every table (tests/support/enum_tables.h) catches such a value.
//
// Not NLOHMANN_JSON_SERIALIZE_ENUM: that macro reads a string it does not know as the first enum
// value listed (and writes an unlisted value as the first name), so a typo, or a state a newer
// peer sends, would be taken silently for a real value.
//
// Documents read through the path-tracking reader (doc/reader.h: configuration, record and
// scenario files) go through Reader::Enum with the same table; its errors also name the file,
// the line and the path of the field.
//
// Header-only; a module that includes it links nlohmann_json already.

#include <nlohmann/json.hpp>
#include <string>

#include "core/enum_table.h"

NLOHMANN_JSON_NAMESPACE_BEGIN

template <class E>
requires stoker::HasEnumTable<E>
struct adl_serializer<E, void> {
  template <class Json>
  static void to_json(Json& j, E e) {
    j = typename Json::string_t(NamesOf(e).Name(e));
  }

  template <class Json>
  static void from_json(const Json& j, E& e) {
    const auto& table = NamesOf(E{});
    const auto* s = j.template get_ptr<const typename Json::string_t*>();
    if (s == nullptr) {
      throw Json::type_error::create(
          302, "type must be string, but is " + std::string(j.type_name()), &j);
    }
    if (auto v = table.Find(*s)) {
      e = *v;
      return;
    }
    throw Json::type_error::create(302, table.Parse(*s).status().message(), &j);
  }
};

NLOHMANN_JSON_NAMESPACE_END
