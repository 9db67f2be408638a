#!/bin/bash
mkdir -p /app/harbor && printf '%s\n' 'acorn keen blossom' 'rabbit granite zebra sparrow' 'fern coral fancy marble' 'hollow walnut quiet' > /app/harbor/steady_melon.txt
