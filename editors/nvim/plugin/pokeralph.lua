-- :Pokeralph (modules load on first use: nothing connects until a command, the
-- statusline component or :checkhealth asks).
if vim.g.loaded_pokeralph then
  return
end
vim.g.loaded_pokeralph = true

if vim.fn.has('nvim-0.7') == 0 then
  vim.api.nvim_err_writeln('pokeralph needs Neovim 0.7 or newer')
  return
end

vim.api.nvim_create_user_command('Pokeralph', function(opts)
  require('pokeralph.commands').run(opts.fargs)
end, {
  nargs = '*',
  desc = 'pokeralph: battles, approvals and the inbox of pokeralphd',
  complete = function(arglead, cmdline)
    return require('pokeralph.commands').complete(arglead, cmdline)
  end,
})
