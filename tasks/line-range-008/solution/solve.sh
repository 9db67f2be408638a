#!/bin/bash
sed -n '12,21p' /app/granite/cobalt_lemon.txt > /app/otter_excerpt.txt
