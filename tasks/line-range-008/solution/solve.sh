#!/bin/bash
sed -n '31,34p' /app/granite/cobalt_lemon.txt > /app/excerpt.txt
