#!/bin/bash
mkdir -p /app/ember && tar xzf /app/fancy-dragon.tar.gz -C /app/ember
grep '^build_id=' /app/ember/crow/jungle/hidden_cedar.ini | cut -d= -f2 > /app/fern_value.txt
