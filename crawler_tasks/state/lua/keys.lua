-- Fragment: key_of(template, ...) -> the name of a key whose variable parts only the
-- script knows (a host it visits, a Bloom generation). `template` is the text around those
-- parts as crawler_tasks.state.keys.template gives it for the Python key function (a list,
-- decoded from JSON), so the name is the one that function gives for the same values:
-- template[1] .. v1 .. template[2] .. v2 .. ... Numbers are written as `..` writes them.
-- Needs no KEYS or ARGV.
local function key_of(template, ...)
  local values, parts = {...}, {template[1]}
  for i = 1, #values do
    parts[#parts + 1] = values[i]
    parts[#parts + 1] = template[i + 1]
  end
  return table.concat(parts)
end
