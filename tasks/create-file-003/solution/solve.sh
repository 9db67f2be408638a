#!/bin/bash
mkdir -p /app/planet && printf '%s\n' 'copy push melon velvet spruce' 'yarrow sunny robin' > /app/planet/wild_lemon.txt
