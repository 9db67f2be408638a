#!/bin/bash
mkdir -p /app/melon && printf '%s\n' 'thistle noble' 'crater grand' 'apple fuzzy bold' > /app/melon/fancy_quartz.txt
