#!/bin/bash
mkdir -p /app/robin && tar xzf /app/vivid-bison.tar.gz -C /app/robin
grep '^license=' /app/robin/acorn/wolf/noble_dragon.ini | cut -d= -f2 > /app/flint_value.txt
