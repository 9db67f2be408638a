#!/bin/bash
sed -n '17,18p' /app/nectar/early_bramble.txt > /app/birch_excerpt.txt
