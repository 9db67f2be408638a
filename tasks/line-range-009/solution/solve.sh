#!/bin/bash
sed -n '26,27p' /app/birch/early_hazel.txt > /app/excerpt.txt
